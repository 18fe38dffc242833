#include "core/arch_descriptor.h"

#include "core/error.h"

namespace akunu {

// Llama with experts is Mixtral (GGUF writes it as "llama"): softmax routing
// over the chosen experts' renormalized weights.
static ArchDescriptor arch_llama() {
    ArchDescriptor d;
    d.moe_norm_topk = true;
    return d;
}

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

// Qwen2-MoE: Qwen2 attention; routed experts with unnormalized softmax
// weights plus one shared expert behind a sigmoid gate.
static ArchDescriptor arch_qwen2moe() {
    ArchDescriptor d = arch_qwen2();
    d.name = "qwen2moe";
    d.moe_norm_topk = false;
    d.moe_shared_gate = true;
    d.moe_ffn_split_by_used = true;
    return d;
}

// Qwen3-MoE: Qwen3 attention; llama.cpp always renormalizes the top-k weights.
static ArchDescriptor arch_qwen3moe() {
    ArchDescriptor d = arch_qwen3();
    d.name = "qwen3moe";
    d.moe_norm_topk = true;
    d.moe_ffn_split_by_used = true;
    return d;
}

// OLMoE: Llama layout with whole-projection Q / K norms, NeoX RoPE, and
// unnormalized softmax routing weights.
static ArchDescriptor arch_olmoe() {
    ArchDescriptor d = arch_llama();
    d.name = "olmoe";
    d.has_qk_norm = true;
    d.qk_norm_full_width = true;
    d.rope_neox = true;
    d.moe_norm_topk = false;
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

// Gemma 2: Gemma with post-norms, local (4096-position window) and global
// layers alternating from a local first one, and soft-capped attention
// scores and logits; both layer kinds share the RoPE base.
static ArchDescriptor arch_gemma2() {
    ArchDescriptor d = arch_gemma();
    d.name = "gemma2";
    d.has_post_attn_norm = true;
    d.has_post_ffn_norm = true;
    d.swa_pattern = 2;
    d.default_sliding_window = 4096;
    d.default_swa_rope_base = 0.0f;
    d.logit_softcapping = true;
    d.attn_scale_dim_per_head_layers = 46;
    return d;
}

// Granite: Llama with scaled embeddings, residual branches and logits, and
// its own attention scale (attention.scale, read for every family).
static ArchDescriptor arch_granite() {
    ArchDescriptor d = arch_llama();
    d.name = "granite";
    d.granite_scales = true;
    return d;
}

// OLMo 2: post-norm blocks without pre-norms, whole-projection Q / K norms,
// NeoX RoPE.
static ArchDescriptor arch_olmo2() {
    ArchDescriptor d = arch_llama();
    d.name = "olmo2";
    d.has_pre_norm = false;
    d.has_post_attn_norm = true;
    d.has_post_ffn_norm = true;
    d.has_qk_norm = true;
    d.qk_norm_full_width = true;
    d.rope_neox = true;
    return d;
}

// SmolLM3: Llama with every fourth layer (3, 7, ...) attending without RoPE.
static ArchDescriptor arch_smollm3() {
    ArchDescriptor d = arch_llama();
    d.name = "smollm3";
    d.no_rope_layer_step = 4;
    return d;
}

// Phi-3: Llama with NeoX RoPE, its Q, K and V in one tensor (attn_qkv) and
// its gate and up projections in another (ffn_up), split at load.
static ArchDescriptor arch_phi3() {
    ArchDescriptor d = arch_llama();
    d.name = "phi3";
    d.rope_neox = true;
    d.ffn_up_holds_gate = true;
    d.ignores_sliding_window = true;
    return d;
}

// gpt-oss: Qwen2-style biased Q / K / V and NeoX RoPE (YaRN on every layer),
// local (sliding-window) and global layers alternating from a local first
// one, attention sinks, a biased O projection and biased experts behind a
// clamped SwiGLU.
static ArchDescriptor arch_gptoss() {
    ArchDescriptor d = arch_llama();
    d.name = "gpt-oss";
    d.activation = Activation::SwigluOai;
    d.has_qkv_bias = true;
    d.rope_neox = true;
    d.swa_pattern = 2;
    d.default_swa_rope_base = 0.0f;
    d.swa_layers_scale_rope = true;
    d.attn_sinks = true;
    d.has_attn_out_bias = true;
    d.moe_biases = true;
    d.moe_softmax_over_chosen = true;
    d.moe_norm_topk = true;
    d.ffn_norm_name = "post_attention_norm";
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
    if (name == "qwen2moe") return arch_qwen2moe();
    if (name == "qwen3moe") return arch_qwen3moe();
    if (name == "olmoe") return arch_olmoe();
    if (name == "gemma") return arch_gemma();
    if (name == "gemma2") return arch_gemma2();
    if (name == "gemma3") return arch_gemma3();
    if (name == "granite") return arch_granite();
    if (name == "olmo2") return arch_olmo2();
    if (name == "smollm3") return arch_smollm3();
    if (name == "phi3") return arch_phi3();
    if (name == "gpt-oss") return arch_gptoss();
    if (name == "bert") return arch_bert();
    throw UnsupportedError("unsupported architecture '" + name +
                           "' (supported: llama, qwen2, qwen3, qwen2moe, qwen3moe, olmoe, gemma, gemma2, gemma3, granite, olmo2, smollm3, phi3, gpt-oss, bert)");
}

}  // namespace akunu
