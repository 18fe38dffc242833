// Model hyperparameters read from GGUF metadata and validated before any
// allocation (so absurd values fail with a message, not an out-of-memory).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/arch_descriptor.h"

namespace akunu {

class ModelFile;

struct ModelConfig {
    std::string architecture;
    std::string name;
    int dim = 0;
    int n_layers = 0;
    int n_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    // feed_forward_length (Hugging Face's intermediate_size): the dense FFN's
    // width. Mixture-of-experts models keep the file's value, which their
    // layers do not use (Qwen-MoE: the dense width of the family; Mixtral,
    // OLMoE: the experts' width, also in expert_ffn_dim); the scratch rows
    // the FFN works in are act_row_width() wide.
    int ffn_dim = 0;
    int vocab_size = 0;
    int context_length = 0;  // trained context
    float norm_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_base_swa = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
    // YaRN: per-dimension divisors of the inverse frequency (head_dim / 2 of
    // them; empty without YaRN), uploaded once at load as the RoPE frequency
    // factors (model_weights.cpp), and the magnitude of cos and sin.
    std::vector<float> rope_yarn_divisors;
    float rope_attn_factor = 1.0f;
    int sliding_window = 0;        // 0 = none
    float attn_scale = 0.0f;
    // Soft caps (ArchDescriptor::logit_softcapping) of the attention scores
    // and of the output logits; 0: none.
    float attn_softcap = 0.0f;
    float final_softcap = 0.0f;
    std::vector<uint8_t> layer_is_local;  // per layer: uses the sliding window
    float norm_weight_offset = 0.0f;      // added to norm weights (HF Gemma checkpoints)
    // Per layer: rotates Q and K (0 on SmolLM3's NoPE layers, which run RoPE
    // with frequency scale 0: an angle of 0, the identity).
    std::vector<uint8_t> layer_uses_rope;
    // The token embeddings' multiplier (Gemma: sqrt(dim); Granite: the file's
    // embedding_scale / residual_scale, see below).
    float embedding_scale = 1.0f;
    // Granite's multipliers as the file gives them (1 for other families).
    // residual_scale r multiplies each block's output before its residual
    // add. The tables carry the residual stream divided by r instead: every
    // norm of a Granite layer reads that stream, and rmsnorm(r x) with eps is
    // rmsnorm(x) with eps / r^2, so the embeddings are scaled by 1 / r more,
    // norm_eps is the file's eps / r^2 and the adds are plain. The logits'
    // 1 / logit_scale is folded into the output norm's weights at load.
    float residual_scale = 1.0f;
    float logit_scale = 1.0f;
    // Encoders (embedding models)
    int pooling = 1;                      // llama.cpp's pooling types: 1 mean, 2 CLS, 3 last token
    bool normalize_embeddings = true;     // L2-normalize pooled embeddings

    // Mixture of experts (0 experts: a dense model). Per token the router
    // picks n_experts_used of n_experts FFNs of width expert_ffn_dim; a
    // shared expert of width shared_expert_ffn_dim (0: none) runs on every
    // token. moe_gating is a MoeGating (kernel_params.h).
    int n_experts = 0;
    int n_experts_used = 0;
    int expert_ffn_dim = 0;
    int shared_expert_ffn_dim = 0;
    uint32_t moe_gating = 0;
    bool moe_norm_topk = false;
    float expert_weights_scale = 0.0f;  // 0 or 1: none

    // Layout of a MoE FFN scratch row (ffn_dim floats a token, in the gate,
    // up and act buffers): [n_experts_used slots of expert_ffn_dim][shared
    // expert] ... padded so the router's n_experts logits fit, then the route
    // (n_experts_used ids, n_experts_used weights, the shared gate's logit) in
    // the act buffer's tail, which the activation does not write. Rows are
    // a multiple of 4 floats, so every row starts 16-byte aligned wherever
    // the first does (the vector loads of CUDA's prefill expert GEMM).
    int moe_active_width() const { return n_experts_used * expert_ffn_dim + shared_expert_ffn_dim; }
    int moe_route_offset() const { return std::max(moe_active_width(), n_experts); }
    int moe_row_width() const { return (moe_route_offset() + 2 * n_experts_used + 1 + 3) / 4 * 4; }

    // Floats a token in the gate, up and act scratch buffers: the dense FFN's
    // activations, or a MoE model's scratch row (moe_row_width).
    int act_row_width() const { return n_experts > 0 ? std::max(ffn_dim, moe_row_width()) : ffn_dim; }

    // Tensor parallelism (parallel/shard_weights.h): the ranks the model is
    // split over (1: not split). On a rank's config the head counts and FFN
    // widths are that rank's share, and its logit projection computes
    // vocab_shard rows of the vocabulary, gathered into vocab_size logits.
    int tp_ranks = 1;
    int vocab_shard = 0;
    // A rank of a mixture-of-experts model split by whole experts (expert
    // parallelism): the experts each rank holds (rank r: [r * n, (r + 1) * n));
    // 0: every rank holds every expert (split by FFN width, or not split).
    int experts_per_rank = 0;
    // Element types of the K and V caches (core/kv_layout.h KvType), set at
    // load (llama.cpp's -ctk / -ctv); F16 unless asked.
    uint32_t k_cache_type = 0;
    uint32_t v_cache_type = 0;

    int q_dim() const { return n_heads * head_dim; }
    int kv_dim() const { return n_kv_heads * head_dim; }
};

ModelConfig config_from_file(const ModelFile& f, const ArchDescriptor& arch);

}  // namespace akunu
