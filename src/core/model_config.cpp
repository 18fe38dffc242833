#include "core/model_config.h"

#include <cmath>

#include "core/error.h"
#include "weight/model_file.h"

namespace akunu {

static int checked_dim(const ModelFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
    int64_t v = f.get_int(key, def);
    if (v < lo || v > hi)
        throw FormatError("metadata '" + key + "' = " + std::to_string(v) + " is outside [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return (int)v;
}

ModelConfig config_from_file(const ModelFile& f, const ArchDescriptor& arch) {
    ModelConfig c;
    c.architecture = f.get_string("general.architecture");
    c.name = f.get_string("general.name", "");
    const std::string a = c.architecture + ".";
    if (!f.has(a + "embedding_length")) throw FormatError("metadata '" + a + "embedding_length' is missing");
    if (!f.has(a + "block_count")) throw FormatError("metadata '" + a + "block_count' is missing");
    if (!f.has(a + "attention.head_count")) throw FormatError("metadata '" + a + "attention.head_count' is missing");
    c.dim = checked_dim(f, a + "embedding_length", 0, 1, 1 << 16);
    c.n_layers = checked_dim(f, a + "block_count", 0, 1, 1024);
    c.n_heads = checked_dim(f, a + "attention.head_count", 0, 1, 1024);
    c.n_kv_heads = checked_dim(f, a + "attention.head_count_kv", c.n_heads, 1, c.n_heads);
    if (c.n_heads % c.n_kv_heads != 0)
        throw FormatError("head count " + std::to_string(c.n_heads) + " is not a multiple of the KV head count " +
                          std::to_string(c.n_kv_heads));
    int def_head = c.dim % c.n_heads == 0 ? c.dim / c.n_heads : 0;
    c.head_dim = checked_dim(f, a + "attention.key_length", def_head, 2, 1024);
    int v_len = checked_dim(f, a + "attention.value_length", c.head_dim, 2, 1024);
    if (v_len != c.head_dim) throw UnsupportedError("key_length != value_length is not supported");
    if (c.head_dim % 2 && !arch.learned_positions) throw FormatError("head dimension must be even for RoPE");
    c.ffn_dim = checked_dim(f, a + "feed_forward_length", 0, 1, 1 << 20);
    c.context_length = checked_dim(f, a + "context_length", 2048, 1, 1 << 24);
    c.norm_eps = (float)f.get_float(a + "attention.layer_norm_rms_epsilon",
                                    f.get_float(a + "attention.layer_norm_epsilon", 1e-5));
    c.rope_base = (float)f.get_float(a + "rope.freq_base", 10000.0);
    c.rope_base_swa = (float)f.get_float(a + "rope.freq_base_swa", arch.default_swa_rope_base);
    std::string scaling = f.get_string(a + "rope.scaling.type", "none");
    double factor = f.get_float(a + "rope.scaling.factor", 0.0);
    if (scaling == "linear" && factor > 0) c.rope_freq_scale = (float)(1.0 / factor);
    else if (scaling == "yarn") throw UnsupportedError("YaRN RoPE scaling is not supported");
    c.sliding_window = checked_dim(f, a + "attention.sliding_window", 0, 0, 1 << 24);
    c.attn_scale = (float)f.get_float(a + "attention.scale", 0.0);
    if (c.attn_scale == 0.0f) c.attn_scale = 1.0f / std::sqrt((float)c.head_dim);

    if (std::string(f.format()) != "gguf") c.norm_weight_offset = arch.hf_norm_weight_offset;
    if (arch.encoder) {
        if (f.get_bool(a + "attention.causal", false))
            throw UnsupportedError("causal encoder models are not supported");
        c.pooling = (int)f.get_int(a + "pooling_type", 1);
        if (c.pooling < 1 || c.pooling > 3)
            throw UnsupportedError("pooling type " + std::to_string(c.pooling) +
                                   " is not supported (1 mean, 2 CLS, 3 last token)");
        c.normalize_embeddings = f.get_bool("akunu.normalize_embeddings", true);
    }
    c.layer_is_local.assign((size_t)c.n_layers, 0);
    if (c.sliding_window > 0 && arch.swa_pattern > 0)
        for (int l = 0; l < c.n_layers; l++)
            c.layer_is_local[(size_t)l] = (l % arch.swa_pattern) < arch.swa_pattern - 1;
    else if (c.sliding_window > 0)
        c.layer_is_local.assign((size_t)c.n_layers, 1);
    if (const GGUFValue* v = f.find(a + "attention.sliding_window_layers"); v && c.sliding_window > 0) {
        if (v->type != GGUFType::ARRAY || v->ints.size() != (size_t)c.n_layers)
            throw FormatError("metadata '" + a + "attention.sliding_window_layers' needs one entry per layer");
        for (int l = 0; l < c.n_layers; l++) c.layer_is_local[(size_t)l] = v->ints[(size_t)l] != 0;
    }

    const GGUFTensorInfo* emb = f.tensor("token_embd.weight");
    if (!emb) throw FormatError("tensor 'token_embd.weight' is missing");
    if (emb->shape.size() != 2 || emb->shape[0] != (uint64_t)c.dim)
        throw FormatError("tensor 'token_embd.weight' has shape inconsistent with embedding_length " +
                          std::to_string(c.dim));
    if (emb->shape[1] > (1u << 24)) throw FormatError("vocabulary size is absurd");
    c.vocab_size = (int)emb->shape[1];
    return c;
}

}  // namespace akunu
