// Model hyperparameters read from GGUF metadata and validated before any
// allocation (so absurd values fail with a message, not an out-of-memory).
#pragma once
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
    std::vector<uint8_t> layer_is_local;  // per layer: uses the sliding window
    float norm_weight_offset = 0.0f;      // added to norm weights (HF Gemma checkpoints)
    // Encoders (embedding models)
    int pooling = 1;                      // llama.cpp's pooling types: 1 mean, 2 CLS, 3 last token
    bool normalize_embeddings = true;     // L2-normalize pooled embeddings

    int q_dim() const { return n_heads * head_dim; }
    int kv_dim() const { return n_kv_heads * head_dim; }
};

ModelConfig config_from_file(const ModelFile& f, const ArchDescriptor& arch);

}  // namespace akunu
