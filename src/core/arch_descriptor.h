// Architectures as data (book, "The ArchDescriptor"). The table builder reads
// these fields; it never compares architecture names.
#pragma once
#include <string>

namespace akunu {

// GeluErf: ungated, erf form (BERT). SwigluOai: gpt-oss's clamped SwiGLU
// (the swiglu_oai kernel, core/kernel_params.h).
enum class Activation { SiluGate, GeluGate, GeluErf, SwigluOai };
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
    // local layers' RoPE base unless the file says (0: the global layers' base)
    float default_swa_rope_base = 10000.0f;
    int default_sliding_window = 0;  // the window when the file names none (Gemma 2: 4096)
    // Gemma 2: attention scores and the final logits are soft-capped
    // (cap * tanh(x / cap)), with the file's caps or the family's 50 and 30.
    bool logit_softcapping = false;
    // Gemma 2: a model of this many layers (its 27B) scales attention by
    // 1 / sqrt(dim / n_heads) instead of 1 / sqrt(head_dim), as llama.cpp
    // decides it (the file carries no scale); 0: never.
    int attn_scale_dim_per_head_layers = 0;
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

    // Mixture of experts (a model is one when its file names experts:
    // ModelConfig::n_experts > 0; these fields say how the family routes).
    // moe_norm_topk: the chosen experts' weights are divided by their sum
    // (llama.cpp's norm_w for the family; Hugging Face configs may say
    // otherwise through norm_topk_prob). moe_shared_gate: the shared expert's
    // output is scaled by sigmoid(x . ffn_gate_inp_shexp) (Qwen2-MoE).
    bool moe_norm_topk = false;
    bool moe_shared_gate = false;
    // Without expert_feed_forward_length an expert is feed_forward_length /
    // expert_used_count wide (Qwen-MoE, as llama.cpp reads it); otherwise
    // feed_forward_length wide (Mixtral, OLMoE).
    bool moe_ffn_split_by_used = false;
    // OLMoE: the Q and K norms span the whole projection (q_dim / kv_dim),
    // not each head.
    bool qk_norm_full_width = false;

    // OLMo 2: no norm before attention or the FFN (the blocks read the
    // residual stream as it is); the post-norms (has_post_attn_norm,
    // has_post_ffn_norm) normalize their outputs instead.
    bool has_pre_norm = true;
    // SmolLM3: every no_rope_layer_step-th layer (l + 1 a multiple of it)
    // attends without RoPE (0: every layer rotates). llama.cpp fixes the step
    // for the family (4) and reads no key for it.
    int no_rope_layer_step = 0;
    // Granite: the file's embedding_scale, residual_scale and logit_scale
    // multiply the embeddings, each block's output before its residual add,
    // and divide the logits (ModelConfig folds them into existing parameters).
    bool granite_scales = false;
    // Phi-3: ffn_up holds the gate projection's rows, then the up
    // projection's ([dim, 2 * ffn_dim]); split at load.
    bool ffn_up_holds_gate = false;
    // Phi-3: the converter writes attention.sliding_window, which llama.cpp
    // does not apply (every layer attends to the whole context).
    bool ignores_sliding_window = false;

    // gpt-oss: a learned sink logit a query head in every layer's softmax
    // (attn_sinks, AttentionParams::sinks), a bias on the output projection,
    // biases on the router and on every expert's gate, up and down rows, and
    // routing weights that are the softmax of the chosen experts' logits
    // (the softmax over all experts renormalized over the chosen: the file's
    // gating keys are not read).
    bool attn_sinks = false;
    bool has_attn_out_bias = false;
    bool moe_biases = false;
    bool moe_softmax_over_chosen = false;
    // The norm before the FFN (gpt-oss's files name it post_attention_norm).
    const char* ffn_norm_name = "ffn_norm";
    // Local layers rotate with the global layers' RoPE scaling (YaRN) too
    // (gpt-oss); otherwise they rotate unscaled (Gemma 3).
    bool swa_layers_scale_rope = false;
};

// The descriptor for a GGUF `general.architecture` value; throws
// UnsupportedError for architectures we do not implement.
ArchDescriptor arch_from_name(const std::string& name);

}  // namespace akunu
