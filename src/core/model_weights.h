// The weights of a decoder model, resolved by name once at load.
#pragma once
#include <vector>

#include "weight/weight_provider.h"

namespace akunu {

struct LayerWeights {
    Weight attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, post_attn_norm;
    Weight ffn_norm, w_gate, w_up, w_down, post_ffn_norm;
    // Encoders: output projection and FFN biases, LayerNorm biases
    Weight bo, b_up, b_down, attn_norm_b, ffn_norm_b;
    // Mixture of experts: the router [dim -> n_experts], the stacked expert
    // matrices ([dim, expert_ffn, n] / [expert_ffn, dim, n]), and the shared
    // expert with its gate ([dim -> 1]) where the family has them.
    Weight gate_inp, gate_exps, up_exps, down_exps;
    Weight gate_inp_shexp, gate_shexp, up_shexp, down_shexp;
    // gpt-oss: each query head's sink logit ([n_heads] F32), the router's
    // bias ([n_experts]) and the experts' biases ([expert_ffn, n] for gate
    // and up, [dim, n] for down; F32); bo (above) is its O projection's.
    Weight sinks, b_gate_inp, b_gate_exps, b_up_exps, b_down_exps;
};

struct ModelWeights {
    Weight tok_embd, output_norm, output, rope_freqs;
    bool has_rope_freqs = false;
    // Encoders: learned positions with token type 0 folded in ([n_ctx, dim]
    // F32), and the LayerNorm applied to the embeddings.
    Weight positions, embd_norm, embd_norm_b;
    std::vector<LayerWeights> layers;
};

struct ArchDescriptor;
struct ModelConfig;

// Looks up and shape-checks every tensor the architecture needs.
ModelWeights resolve_weights(WeightProvider& wp, const ModelConfig& c, const ArchDescriptor& arch);

}  // namespace akunu
