// The weights of a decoder model, resolved by name once at load.
#pragma once
#include <vector>

#include "weight/weight_provider.h"

namespace akunu {

struct LayerWeights {
    Weight attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, post_attn_norm;
    Weight ffn_norm, w_gate, w_up, w_down, post_ffn_norm;
};

struct ModelWeights {
    Weight tok_embd, output_norm, output, rope_freqs;
    bool has_rope_freqs = false;
    std::vector<LayerWeights> layers;
};

struct ArchDescriptor;
struct ModelConfig;

// Looks up and shape-checks every tensor the architecture needs.
ModelWeights resolve_weights(WeightProvider& wp, const ModelConfig& c, const ArchDescriptor& arch);

}  // namespace akunu
