#include "core/model_config.h"

#include <algorithm>
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

static double checked_float(const ModelFile& f, const std::string& key, double def, double lo, double hi) {
    const double v = f.get_float(key, def);
    if (!(v >= lo && v <= hi))
        throw FormatError("metadata '" + key + "' = " + std::to_string(v) + " is outside [" + std::to_string(lo) +
                          ", " + std::to_string(hi) + "]");
    return v;
}

// llama.cpp's YaRN correction range (ggml_rope_yarn_corr_dims, in float as
// there): the dimensions between which the blend goes from extrapolation
// (fast-rotating pairs, left as trained) to interpolation (slow pairs,
// divided by the factor).
static void yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast, float beta_slow, float dims[2]) {
    auto corr_dim = [&](float n_rot) {
        return (float)n_dims * std::log((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * std::log(base));
    };
    dims[0] = std::max(0.0f, std::floor(corr_dim(beta_fast)));
    dims[1] = std::min((float)(n_dims - 1), std::ceil(corr_dim(beta_slow)));
}

// RoPE scaling from GGUF metadata with llama.cpp's meaning (llama-model.cpp,
// llama-context.cpp, ggml's rope_yarn):
// - rope.scaling.type absent means linear; rope.scaling.factor (or the old
//   rope.scale_linear) f gives freq_scale 1/f; 0 or absent means none.
// - yarn: each pair's angle blends interpolation (angle / f) and
//   extrapolation (angle) by ramp_j * ext_factor, ramp_j falling from 1 to 0
//   over the correction range of original_context_length with
//   yarn_beta_fast / yarn_beta_slow (32 / 1); that is a per-dimension
//   divisor of the inverse frequency, 1 / (1/f * (1 - mix_j) + mix_j). With
//   ext_factor != 0 (default 1) llama.cpp's cos/sin magnitude is
//   (0.1 ln f + 1) * rope.scaling.attn_factor: it sets yarn_attn_factor to
//   get_mscale(f) / (1 + 0.1 ln f) and ggml multiplies by 1 + 0.1 ln f again,
//   so the file's yarn_attn_factor is not used. With ext_factor 0 the angle
//   is plain linear and the magnitude yarn_attn_factor * attn_factor.
//   (yarn_log_multiplier is read by llama.cpp's DeepSeek / Mistral 3 models
//   only, none of which akunu runs; it is ignored here, as llama.cpp does
//   for the architectures akunu runs.)
// - rope.scaling.attn_factor multiplies cos and sin whatever the type.
// Transformers' meaning for Hugging Face directories is computed by the
// directory reader (hf_directory.cpp), which hands over the divisors as
// rope_freqs.weight and the magnitude as rope.scaling.attn_factor.
static void read_rope_scaling(const ModelFile& f, const std::string& a, ModelConfig& c) {
    const std::string scaling = f.get_string(a + "rope.scaling.type", "linear");
    double factor = checked_float(f, a + "rope.scaling.factor", 0.0, 0.0, 1e6);
    if (factor == 0.0) factor = checked_float(f, a + "rope.scale_linear", 0.0, 0.0, 1e6);
    const float freq_scale = factor == 0.0 ? 1.0f : (float)(1.0 / factor);
    c.rope_attn_factor = (float)checked_float(f, a + "rope.scaling.attn_factor", 1.0, 1e-6, 1e6);
    if (scaling == "none") return;
    if (scaling == "linear") {
        c.rope_freq_scale = freq_scale;
        return;
    }
    if (scaling != "yarn")
        throw UnsupportedError("RoPE scaling type '" + scaling + "' is not supported (none, linear, yarn)");
    double ext = checked_float(f, a + "rope.scaling.yarn_ext_factor", -1.0, -1e6, 1e6);
    if (ext < 0) ext = 1.0;  // negative means not set: 1 for YaRN
    if (ext == 0.0) {
        c.rope_freq_scale = freq_scale;
        c.rope_attn_factor *= (float)checked_float(f, a + "rope.scaling.yarn_attn_factor", 1.0, 1e-6, 1e6);
        return;
    }
    int n_ctx_orig = checked_dim(f, a + "rope.scaling.original_context_length", c.context_length, 0, 1 << 24);
    if (n_ctx_orig == 0) n_ctx_orig = c.context_length;
    const float beta_fast = (float)checked_float(f, a + "rope.scaling.yarn_beta_fast", 32.0, -1e6, 1e6);
    const float beta_slow = (float)checked_float(f, a + "rope.scaling.yarn_beta_slow", 1.0, -1e6, 1e6);
    if (!(c.rope_base > 1.0f)) throw FormatError("YaRN needs a RoPE base above 1 (metadata '" + a + "rope.freq_base')");
    if (!(beta_fast > 0 && beta_slow > 0))
        throw FormatError("metadata '" + a + "rope.scaling.yarn_beta_fast' / 'yarn_beta_slow' must be positive");
    float dims[2];
    yarn_corr_dims(c.head_dim, n_ctx_orig, c.rope_base, beta_fast, beta_slow, dims);
    c.rope_yarn_divisors.resize((size_t)c.head_dim / 2);
    for (size_t j = 0; j < c.rope_yarn_divisors.size(); j++) {
        const float y = ((float)j - dims[0]) / std::max(0.001f, dims[1] - dims[0]);
        const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * (float)ext;
        c.rope_yarn_divisors[j] = 1.0f / (freq_scale * (1.0f - mix) + mix);
    }
    const double f_eff = 1.0 / (double)freq_scale;
    if (f_eff > 1.0) c.rope_attn_factor *= (float)(0.1 * std::log(f_eff) + 1.0);
}

// Mixture of experts from llama.cpp's keys: expert_count, expert_used_count,
// expert_feed_forward_length (absent: feed_forward_length / used for
// Qwen-MoE, as llama.cpp; Mixtral's experts are feed_forward_length wide),
// expert_shared_feed_forward_length, expert_gating_func (1 softmax, 2
// sigmoid), expert_weights_norm, expert_weights_scale. ffn_dim keeps
// feed_forward_length; the scratch rows are act_row_width() wide.
static void read_experts(const ModelFile& f, const std::string& a, const ArchDescriptor& arch, ModelConfig& c) {
    c.n_experts = checked_dim(f, a + "expert_count", 0, 0, 4096);
    if (c.n_experts == 0) return;
    if (arch.encoder) throw UnsupportedError("encoders with experts are not supported");
    c.n_experts_used = checked_dim(f, a + "expert_used_count", 0, 1, std::min(c.n_experts, 64));
    const int def_ff = arch.moe_ffn_split_by_used ? c.ffn_dim / c.n_experts_used : c.ffn_dim;
    c.expert_ffn_dim = checked_dim(f, a + "expert_feed_forward_length", def_ff, 1, 1 << 20);
    if (arch.moe_shared_gate)
        c.shared_expert_ffn_dim = checked_dim(f, a + "expert_shared_feed_forward_length", c.ffn_dim, 1, 1 << 20);
    if (arch.moe_softmax_over_chosen) {  // the chosen experts' softmax: softmax gating, renormalized
        c.moe_gating = 0u;
        c.moe_norm_topk = true;
    } else {
        const int gating = checked_dim(f, a + "expert_gating_func", 1, 1, 2);
        c.moe_gating = gating == 2 ? 1u : 0u;  // MoeGating: kMoeSigmoid : kMoeSoftmax
        c.moe_norm_topk = f.get_bool(a + "expert_weights_norm", arch.moe_norm_topk);
    }
    c.expert_weights_scale = (float)checked_float(f, a + "expert_weights_scale", 0.0, 0.0, 1e6);
    if ((int64_t)c.moe_row_width() > (1 << 24)) throw FormatError("expert FFN widths are absurd");
}

// Embedding multipliers, Granite's scales (see ModelConfig) and the layers
// without RoPE. Runs after norm_eps is read.
static void read_family_scales(const ModelFile& f, const std::string& a, const ArchDescriptor& arch,
                               ModelConfig& c) {
    c.embedding_scale = arch.embedding_scale_sqrt_dim ? std::sqrt((float)c.dim) : 1.0f;
    if (arch.granite_scales) {
        // llama.cpp: 0 or absent means no scaling for embedding / residual;
        // logit_scale is required there, absent means 1 here.
        double e = checked_float(f, a + "embedding_scale", 0.0, 0.0, 1e6);
        double r = checked_float(f, a + "residual_scale", 0.0, 0.0, 1e6);
        double ls = checked_float(f, a + "logit_scale", 1.0, 1e-6, 1e6);
        if (e == 0.0) e = 1.0;
        if (r == 0.0) r = 1.0;
        if (r < 1e-6) throw FormatError("metadata '" + a + "residual_scale' is too small");
        if (!f.get_bool(a + "rope.scaling.finetuned", true))
            throw UnsupportedError("Granite models without RoPE (rope.scaling.finetuned = false) are not supported");
        if (f.tensor("blk.0.attn_q.bias") || f.tensor("blk.0.attn_output.bias") || f.tensor("blk.0.ffn_down.bias"))
            throw UnsupportedError("Granite models with projection biases are not supported");
        c.residual_scale = (float)r;
        c.logit_scale = (float)ls;
        c.embedding_scale = (float)(e / r);
        c.norm_eps = (float)((double)c.norm_eps / (r * r));
    }
    // OLMo 3 writes olmo2 files with a sliding window on three layers of four
    // and its own RoPE base rules for them: not run here.
    if (!arch.has_pre_norm && c.sliding_window > 0)
        throw UnsupportedError("'" + c.architecture + "' models with a sliding window are not supported");
    if (!arch.has_pre_norm && c.n_experts > 0)
        throw UnsupportedError("'" + c.architecture + "' models with experts are not supported");
    c.layer_uses_rope.assign((size_t)c.n_layers, 1);
    if (arch.no_rope_layer_step > 0)
        for (int l = 0; l < c.n_layers; l++)
            c.layer_uses_rope[(size_t)l] = (l + 1) % arch.no_rope_layer_step != 0;
    // Hugging Face directories name the rotating layers (SmolLM3's no_rope_layers).
    if (const GGUFValue* v = f.find("akunu.rope_layers")) {
        if (arch.no_rope_layer_step == 0)
            throw UnsupportedError("'" + c.architecture + "' models with layers without RoPE are not supported");
        if (v->type != GGUFType::ARRAY || v->ints.size() != (size_t)c.n_layers)
            throw FormatError("metadata 'akunu.rope_layers' needs one entry per layer");
        for (int l = 0; l < c.n_layers; l++) c.layer_uses_rope[(size_t)l] = v->ints[(size_t)l] != 0;
    }
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
    c.rope_base_swa = (float)f.get_float(a + "rope.freq_base_swa",
                                         arch.default_swa_rope_base > 0.0f ? arch.default_swa_rope_base : c.rope_base);
    read_rope_scaling(f, a, c);
    c.sliding_window = checked_dim(f, a + "attention.sliding_window", arch.default_sliding_window, 0, 1 << 24);
    if (arch.ignores_sliding_window) c.sliding_window = 0;
    // Partial rotary embeddings (RoPE on the first n_rot dimensions) are not run.
    if (!arch.learned_positions && f.has(a + "rope.dimension_count") &&
        f.get_int(a + "rope.dimension_count", 0) != c.head_dim)
        throw UnsupportedError("RoPE over " + std::to_string(f.get_int(a + "rope.dimension_count", 0)) + " of " +
                               std::to_string(c.head_dim) + " head dimensions (rope.dimension_count) is not supported");
    if (f.tensor("rope_factors_long.weight") || f.tensor("rope_factors_short.weight"))
        throw UnsupportedError("LongRoPE (rope_factors_long / rope_factors_short) is not supported");
    c.attn_scale = (float)f.get_float(a + "attention.scale", 0.0);
    if (c.attn_scale == 0.0f && c.n_layers == arch.attn_scale_dim_per_head_layers)
        c.attn_scale = 1.0f / std::sqrt((float)(c.dim / c.n_heads));
    if (c.attn_scale == 0.0f) c.attn_scale = 1.0f / std::sqrt((float)c.head_dim);
    if (arch.logit_softcapping) {
        c.attn_softcap = (float)checked_float(f, a + "attn_logit_softcapping", 50.0, 0.0, 1e6);
        c.final_softcap = (float)checked_float(f, a + "final_logit_softcapping", 30.0, 0.0, 1e6);
    }

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

    read_experts(f, a, arch, c);
    read_family_scales(f, a, arch, c);

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
