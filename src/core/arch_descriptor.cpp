#include "core/arch_descriptor.h"

#include "core/error.h"

namespace akunu {

static ArchDescriptor arch_llama() { return ArchDescriptor{}; }

static ArchDescriptor arch_qwen2() {
    ArchDescriptor d = arch_llama();
    d.name = "qwen2";
    d.has_qkv_bias = true;
    d.rope_neox = true;
    return d;
}

static ArchDescriptor arch_qwen3() {
    ArchDescriptor d = arch_llama();
    d.name = "qwen3";
    d.has_qk_norm = true;
    d.rope_neox = true;
    return d;
}

static ArchDescriptor arch_gemma() {
    ArchDescriptor d = arch_llama();
    d.name = "gemma";
    d.activation = Activation::GeluGate;
    d.embedding_scale_sqrt_dim = true;
    d.rope_neox = true;
    d.hf_norm_weight_offset = 1.0f;
    return d;
}

static ArchDescriptor arch_gemma3() {
    ArchDescriptor d = arch_gemma();
    d.name = "gemma3";
    d.has_qk_norm = true;
    d.has_post_attn_norm = true;
    d.has_post_ffn_norm = true;
    d.swa_pattern = 6;
    return d;
}

static ArchDescriptor arch_bert() {
    ArchDescriptor d;
    d.name = "bert";
    d.activation = Activation::GeluErf;
    d.encoder = true;
    d.norm = NormKind::LayerNorm;
    d.learned_positions = true;
    d.has_embedding_norm = true;
    d.post_norm = true;
    d.gated_ffn = false;
    d.has_linear_biases = true;
    d.has_qkv_bias = true;
    return d;
}

ArchDescriptor arch_from_name(const std::string& name) {
    if (name == "llama") return arch_llama();
    if (name == "qwen2") return arch_qwen2();
    if (name == "qwen3") return arch_qwen3();
    if (name == "gemma") return arch_gemma();
    if (name == "gemma3") return arch_gemma3();
    if (name == "bert") return arch_bert();
    throw UnsupportedError("unsupported architecture '" + name +
                           "' (supported: llama, qwen2, qwen3, gemma, gemma3, bert)");
}

}  // namespace akunu
