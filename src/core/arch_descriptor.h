// Architectures as data (book, "The ArchDescriptor"). The table builder reads
// these fields; it never compares architecture names.
#pragma once
#include <string>

namespace akunu {

enum class Activation { SiluGate, GeluGate };

struct ArchDescriptor {
    const char* name = "llama";
    Activation activation = Activation::SiluGate;
    bool embedding_scale_sqrt_dim = false;  // Gemma: h0 *= sqrt(dim)
    bool has_qk_norm = false;               // per-head RMSNorm on Q and K (Qwen3, Gemma3)
    bool has_post_attn_norm = false;        // Gemma3: norm on the attention output
    bool has_post_ffn_norm = false;         // Gemma3: norm on the FFN output
    bool has_qkv_bias = false;              // Qwen2
    bool rope_neox = false;                 // split-half rotation instead of pairs
    // Sliding-window pattern: every swa_pattern-th layer is global, the others
    // local (0 = every layer global). Only applies when the file sets a window.
    int swa_pattern = 0;
    float default_swa_rope_base = 10000.0f;  // local layers' RoPE base unless the file says
    bool attn_scale_by_head_dim = true;      // 1/sqrt(head_dim)
};

// The descriptor for a GGUF `general.architecture` value; throws
// UnsupportedError for architectures we do not implement.
ArchDescriptor arch_from_name(const std::string& name);

}  // namespace akunu
