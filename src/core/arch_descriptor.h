// Architectures as data (book, "The ArchDescriptor"). The table builder reads
// these fields; it never compares architecture names.
#pragma once
#include <string>

namespace akunu {

enum class Activation { SiluGate, GeluGate, GeluErf };  // GeluErf: ungated, erf form (BERT)
enum class NormKind { RMSNorm, LayerNorm };

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
    // Hugging Face checkpoints store Gemma's norm weights as w - 1 (the GGUF
    // converter adds the 1 back); this offset is added when loading those.
    float hf_norm_weight_offset = 0.0f;

    // Encoder-only models (BERT): bidirectional attention over the whole
    // sequence, learned absolute positions (+ token type 0) added to the
    // embeddings, LayerNorm with bias after each residual add, an ungated FFN,
    // biases on every projection; the output is hidden states for pooling.
    bool encoder = false;
    NormKind norm = NormKind::RMSNorm;
    bool learned_positions = false;
    bool has_embedding_norm = false;
    bool post_norm = false;         // norm after the residual add instead of before the block
    bool gated_ffn = true;
    bool has_linear_biases = false;  // q/k/v/o and FFN projections carry biases
};

// The descriptor for a GGUF `general.architecture` value; throws
// UnsupportedError for architectures we do not implement.
ArchDescriptor arch_from_name(const std::string& name);

}  // namespace akunu
