#include "weight/hf_directory.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/half.h"
#include "weight/whisper_names.h"

namespace akunu {
namespace {

bool file_exists(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// config.json model_type -> our architecture name
std::string arch_for_model_type(const std::string& t) {
    if (t == "llama" || t == "mistral") return "llama";
    if (t == "qwen2") return "qwen2";
    if (t == "qwen3") return "qwen3";
    if (t == "qwen2_moe") return "qwen2moe";
    if (t == "qwen3_moe") return "qwen3moe";
    if (t == "mixtral") return "llama";  // Llama with experts, as llama.cpp's converter writes it
    if (t == "olmoe") return "olmoe";
    if (t == "gpt_oss") return "gpt-oss";
    if (t == "granite") return "granite";
    if (t == "olmo2") return "olmo2";
    if (t == "smollm3") return "smollm3";
    if (t == "phi3") return "phi3";
    if (t == "gemma") return "gemma";
    if (t == "gemma2") return "gemma2";
    if (t == "gemma3" || t == "gemma3_text") return "gemma3";
    if (t == "bert") return "bert";
    if (t == "whisper") return "whisper";
    throw UnsupportedError("model_type '" + t +
                           "' in config.json is not supported (supported: llama, mistral, mixtral, qwen2, qwen3, "
                           "qwen2_moe, qwen3_moe, olmoe, gpt_oss, granite, olmo2, smollm3, phi3, gemma, gemma2, gemma3, bert, "
                           "whisper)");
}

// HF module path (without the .weight/.bias suffix) -> GGUF tensor base name,
// or "" for modules the forward pass does not use (pooler, rotary caches).
// post_attention_is_post_norm: post_attention_layernorm normalizes the
// attention's output (Gemma 3, which also has a pre-FFN norm; OLMo 2), not
// the FFN's input.
std::string gguf_module(std::string m, bool post_attention_is_post_norm) {
    for (const char* prefix : {"model.language_model.", "language_model.model.", "language_model.", "model.", "bert."})
        if (m.rfind(prefix, 0) == 0) {
            m = m.substr(std::char_traits<char>::length(prefix));
            break;
        }
    static const std::map<std::string, std::string> top = {
        {"embed_tokens", "token_embd"},
        {"norm", "output_norm"},
        {"lm_head", "output"},
        {"embeddings.word_embeddings", "token_embd"},
        {"embeddings.position_embeddings", "position_embd"},
        {"embeddings.token_type_embeddings", "token_types"},
        {"embeddings.LayerNorm", "token_embd_norm"},
    };
    auto it = top.find(m);
    if (it != top.end()) return it->second;
    std::string rest;
    size_t layer;
    for (const char* prefix : {"layers.", "encoder.layer."}) {
        if (m.rfind(prefix, 0) != 0) continue;
        std::string tail = m.substr(std::char_traits<char>::length(prefix));
        size_t dot = tail.find('.');
        if (dot == std::string::npos || dot == 0 || dot > 6) return "";
        for (size_t i = 0; i < dot; i++)
            if (tail[i] < '0' || tail[i] > '9') return "";
        layer = (size_t)std::stoul(tail.substr(0, dot));
        rest = tail.substr(dot + 1);
        static const std::map<std::string, std::string> in_layer = {
            {"input_layernorm", "attn_norm"},
            {"self_attn.q_proj", "attn_q"},
            {"self_attn.k_proj", "attn_k"},
            {"self_attn.v_proj", "attn_v"},
            {"self_attn.o_proj", "attn_output"},
            {"self_attn.qkv_proj", "attn_qkv"},  // Phi-3: Q, K and V rows in one matrix
            {"mlp.gate_up_proj", "ffn_up"},      // Phi-3: gate rows, then up rows
            {"self_attn.q_norm", "attn_q_norm"},
            {"self_attn.k_norm", "attn_k_norm"},
            {"pre_feedforward_layernorm", "ffn_norm"},
            {"post_feedforward_layernorm", "post_ffw_norm"},
            {"mlp.gate_proj", "ffn_gate"},
            {"mlp.up_proj", "ffn_up"},
            {"mlp.down_proj", "ffn_down"},
            {"mlp.gate", "ffn_gate_inp"},  // MoE routers
            {"mlp.router", "ffn_gate_inp"},  // (gpt-oss)
            {"block_sparse_moe.gate", "ffn_gate_inp"},
            {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
            {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
            {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
            {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
            {"attention.self.query", "attn_q"},
            {"attention.self.key", "attn_k"},
            {"attention.self.value", "attn_v"},
            {"attention.output.dense", "attn_output"},
            {"attention.output.LayerNorm", "attn_output_norm"},
            {"intermediate.dense", "ffn_up"},
            {"output.dense", "ffn_down"},
            {"output.LayerNorm", "layer_output_norm"},
        };
        std::string name;
        if (rest == "post_attention_layernorm")  // Gemma 3 has both a post-attention and a pre-FFN norm
            name = post_attention_is_post_norm ? "post_attention_norm" : "ffn_norm";
        else {
            auto jt = in_layer.find(rest);
            if (jt == in_layer.end()) return "";
            name = jt->second;
        }
        return "blk." + std::to_string(layer) + "." + name;
    }
    return "";
}

// An expert's matrix (HF: one module per expert; GGUF: the layer's experts
// stacked in one tensor): "layers.N.mlp.experts.E.gate_proj" (Qwen-MoE,
// OLMoE) or "layers.N.block_sparse_moe.experts.E.w1" (Mixtral: w1 gate, w3
// up, w2 down) -> ("blk.N.ffn_gate_exps", E); ("", 0) for other modules.
std::pair<std::string, size_t> expert_module(std::string m) {
    for (const char* prefix : {"model.language_model.", "language_model.model.", "language_model.", "model."})
        if (m.rfind(prefix, 0) == 0) {
            m = m.substr(std::char_traits<char>::length(prefix));
            break;
        }
    auto number_at = [&](size_t& i, size_t& out) {  // digits at i up to a '.', which is skipped
        size_t j = i;
        while (j < m.size() && j - i < 7 && m[j] >= '0' && m[j] <= '9') j++;
        if (j == i || j >= m.size() || m[j] != '.') return false;
        out = (size_t)std::stoul(m.substr(i, j - i));
        i = j + 1;
        return true;
    };
    size_t i = 0, layer = 0, expert = 0;
    if (m.rfind("layers.", 0) != 0) return {"", 0};
    i = 7;
    if (!number_at(i, layer)) return {"", 0};
    for (const char* kind : {"mlp.experts.", "block_sparse_moe.experts."}) {
        const size_t n = std::char_traits<char>::length(kind);
        if (m.compare(i, n, kind) != 0) continue;
        size_t j = i + n;
        if (!number_at(j, expert)) return {"", 0};
        static const std::map<std::string, std::string> proj = {
            {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"},
            {"w1", "ffn_gate_exps"},        {"w3", "ffn_up_exps"},      {"w2", "ffn_down_exps"}};
        auto it = proj.find(m.substr(j));
        if (it == proj.end()) return {"", 0};
        return {"blk." + std::to_string(layer) + "." + it->second, expert};
    }
    return {"", 0};
}

uint32_t float_dtype(const std::string& d) {
    if (d == "F32") return GGML_F32;
    if (d == "F16") return GGML_F16;
    if (d == "BF16") return GGML_BF16;
    return UINT32_MAX;
}

float read_float(const SafeTensor& t, size_t i) {
    const uint8_t* p = t.data;
    if (t.dtype == "F32") {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        return v;
    }
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return t.dtype == "F16" ? f16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace

HFDirectory::HFDirectory(const std::string& dir) : dir_(dir) {
    if (!file_exists(dir_ + "/config.json"))
        throw FormatError("'" + dir_ + "' is a directory without config.json: not a Hugging Face / MLX model");
    read_config();
    open_shards();
    map_tensors();
    read_pooling();
}

uint8_t* HFDirectory::own(size_t bytes) {
    owned_.emplace_back(new uint8_t[bytes]);
    return owned_.back().get();
}

void HFDirectory::open_shards() {
    const std::string index_path = dir_ + "/model.safetensors.index.json";
    std::vector<std::string> files;
    if (file_exists(index_path)) {
        JsonValue index = read_json_file(index_path);
        const JsonValue* map = index.get("weight_map");
        if (!map || !map->is_object()) throw FormatError("'" + index_path + "' has no weight_map object");
        std::set<std::string> seen;
        for (const auto& kv : map->obj) {
            if (!kv.second.is_string() || kv.second.str.empty() || kv.second.str.find('/') != std::string::npos ||
                kv.second.str.find("..") != std::string::npos)
                throw FormatError("'" + index_path + "': bad shard name for tensor '" + kv.first + "'");
            if (seen.insert(kv.second.str).second) files.push_back(kv.second.str);
        }
        for (const std::string& f : files)
            if (!file_exists(dir_ + "/" + f))
                throw FormatError("shard '" + f + "' named in model.safetensors.index.json is missing from '" + dir_ +
                                  "'");
        for (const std::string& f : files) shards_.push_back(std::make_unique<SafeTensorsFile>(dir_ + "/" + f));
        for (const auto& kv : map->obj) {
            bool found = false;
            for (const auto& s : shards_)
                if (s->path() == dir_ + "/" + kv.second.str) found = s->find(kv.first) != nullptr;
            if (!found)
                throw FormatError("tensor '" + kv.first + "' is not in shard '" + kv.second.str +
                                  "' as model.safetensors.index.json says");
        }
        return;
    }
    if (!file_exists(dir_ + "/model.safetensors"))
        throw FormatError("'" + dir_ + "' has neither model.safetensors nor model.safetensors.index.json");
    shards_.push_back(std::make_unique<SafeTensorsFile>(dir_ + "/model.safetensors"));
}

void HFDirectory::read_config() {
    const std::string what = "'" + dir_ + "/config.json'";
    JsonValue root = read_json_file(dir_ + "/config.json");
    if (!root.is_object()) throw FormatError(what + " is not a JSON object");
    const JsonValue* text = root.get("text_config");
    config_ = text && text->is_object() ? *text : root;
    if (const JsonValue* q = root.get("quantization")) quant_ = *q;
    else if (const JsonValue* q2 = root.get("quantization_config")) quant_ = *q2;
    std::string model_type = config_.string("model_type", root.string("model_type", "", what), what);
    if (model_type.empty()) throw FormatError(what + " has no model_type");
    arch_ = arch_for_model_type(model_type);
    const JsonValue& c = config_;
    const std::string a = arch_ + ".";
    auto need_int = [&](const char* key) {
        if (!c.get(key)) throw FormatError(what + " is missing '" + key + "'");
        return c.integer(key, 0, what);
    };
    kv_["general.architecture"] = gguf_string(arch_);
    kv_["general.name"] = gguf_string(root.string("_name_or_path", dir_, what));
    if (arch_ == "whisper") {
        const std::string gen_path = dir_ + "/generation_config.json";
        JsonValue gen;
        if (file_exists(gen_path)) gen = read_json_file(gen_path);
        whisper_metadata_from_hf(config_, gen.is_object() ? &gen : nullptr, kv_, what);
        return;
    }
    const int64_t hidden = need_int("hidden_size");
    const int64_t heads = need_int("num_attention_heads");
    kv_[a + "embedding_length"] = gguf_int(hidden);
    kv_[a + "block_count"] = gguf_int(need_int("num_hidden_layers"));
    kv_[a + "attention.head_count"] = gguf_int(heads);
    kv_[a + "attention.head_count_kv"] = gguf_int(c.integer("num_key_value_heads", heads, what));
    if (const JsonValue* hd = c.get("head_dim"); hd && hd->kind != JsonValue::Kind::Null)  // Mixtral writes null
        kv_[a + "attention.key_length"] = gguf_int(c.integer("head_dim", 0, what));
    kv_[a + "feed_forward_length"] = gguf_int(need_int("intermediate_size"));
    read_experts(what);
    kv_[a + "context_length"] = gguf_int(c.integer("max_position_embeddings", 2048, what));
    if (arch_ == "bert") {
        kv_[a + "attention.layer_norm_epsilon"] = gguf_float(c.number("layer_norm_eps", 1e-12, what));
        kv_[a + "attention.causal"] = gguf_bool(false);
        kv_[a + "token_type_count"] = gguf_int(c.integer("type_vocab_size", 2, what));
        std::string act = c.string("hidden_act", "gelu", what);
        if (act != "gelu")
            throw UnsupportedError(what + ": BERT hidden_act '" + act + "' is not supported (expected 'gelu')");
        std::string pos = c.string("position_embedding_type", "absolute", what);
        if (pos != "absolute")
            throw UnsupportedError(what + ": position_embedding_type '" + pos + "' is not supported");
        return;
    }
    kv_[a + "attention.layer_norm_rms_epsilon"] = gguf_float(c.number("rms_norm_eps", 1e-6, what));
    // RoPE: transformers < 5 writes rope_theta / rope_scaling / rope_local_base_freq; 5.x writes
    // rope_parameters, per layer type for Gemma 3 ({"full_attention": {...}, "sliding_attention": {...}}).
    const JsonValue* rp = c.get("rope_parameters");
    const JsonValue* full = rp && rp->get("full_attention") ? rp->get("full_attention") : rp;
    const JsonValue* local = rp ? rp->get("sliding_attention") : nullptr;
    double theta = c.number("rope_theta", full ? full->number("rope_theta", 10000.0, what) : 10000.0, what);
    kv_[a + "rope.freq_base"] = gguf_float(theta);
    if (c.get("rope_local_base_freq"))
        kv_[a + "rope.freq_base_swa"] = gguf_float(c.number("rope_local_base_freq", 10000.0, what));
    else if (local)
        kv_[a + "rope.freq_base_swa"] = gguf_float(local->number("rope_theta", 10000.0, what));
    const bool gemma_windows = arch_ == "gemma2" || arch_ == "gemma3" || arch_ == "gpt-oss";
    if (const JsonValue* sw = c.get("sliding_window"); sw && sw->is_number() && gemma_windows) {
        kv_[a + "attention.sliding_window"] = gguf_int(c.integer("sliding_window", 0, what));
        // which layers are local: layer_types, else every pattern-th layer is global
        const int64_t n_layers = c.integer("num_hidden_layers", 0, what);
        GGUFValue pattern;
        pattern.type = GGUFType::ARRAY;
        pattern.elem_type = GGUFType::INT32;
        const JsonValue* types = c.get("layer_types");
        if (types && types->kind == JsonValue::Kind::Array) {
            if ((int64_t)types->arr.size() != n_layers)
                throw FormatError(what + ": layer_types has " + std::to_string(types->arr.size()) + " entries for " +
                                  std::to_string(n_layers) + " layers");
            for (const JsonValue& t : types->arr) pattern.ints.push_back(t.is_string() && t.str == "sliding_attention");
        } else {
            const int64_t family = arch_ == "gemma3" ? 6 : 2;  // Gemma 2, gpt-oss: local, global, local, ...
            int64_t every = c.integer("sliding_window_pattern", c.integer("_sliding_window_pattern", family, what), what);
            if (every < 1) throw FormatError(what + ": bad sliding_window_pattern");
            for (int64_t l = 0; l < n_layers; l++) pattern.ints.push_back((l + 1) % every != 0);
        }
        pattern.array_len = pattern.ints.size();
        kv_[a + "attention.sliding_window_layers"] = pattern;
    }
    read_family_keys(what);
    if (arch_ == "gemma2")  // soft caps: null is none; absent, the family's (ModelConfig's defaults)
        for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
            if (const JsonValue* v = c.get(key))
                kv_[a + key] = gguf_float(v->is_number() ? c.number(key, 0.0, what) : 0.0);
    if (c.get("query_pre_attn_scalar"))
        kv_[a + "attention.scale"] = gguf_float(1.0 / std::sqrt(c.number("query_pre_attn_scalar", 1.0, what)));
    const JsonValue* rs = c.get("rope_scaling");
    if (!rs || !rs->is_object()) rs = full;
    if (rs && rs->is_object()) {
        std::string type = rs->string("rope_type", rs->string("type", "default", what), what);
        if (type == "linear") {
            kv_[a + "rope.scaling.type"] = gguf_string("linear");
            kv_[a + "rope.scaling.factor"] = gguf_float(rs->number("factor", 1.0, what));
        } else if (type == "llama3" || type == "yarn") {
            add_rope_freqs(*rs, theta);
        } else if (type != "default") {
            throw UnsupportedError(what + ": rope_scaling type '" + type + "' is not supported");
        }
    }
}

// Granite's multipliers (llama.cpp's converter: embedding_multiplier,
// residual_multiplier, logits_scaling, attention_multiplier) and SmolLM3's
// layers without RoPE (no_rope_layers: 1 where a layer rotates; as
// akunu.rope_layers, which ModelConfig reads before the family's fixed step).
// Phi-3's sliding_window is not applied, as llama.cpp does not: the same
// results as transformers up to the window's length (2047 tokens for
// Phi-3-mini-4k).
void HFDirectory::read_family_keys(const std::string& what) {
    const JsonValue& c = config_;
    const std::string a = arch_ + ".";
    // Partial rotary embeddings (Phi-4-mini, written as phi3) are not run.
    const JsonValue* rp = c.get("rope_parameters");
    if (c.number("partial_rotary_factor", 1.0, what) != 1.0 ||
        (rp && rp->is_object() && rp->number("partial_rotary_factor", 1.0, what) != 1.0))
        throw UnsupportedError(what + ": partial_rotary_factor other than 1 is not supported");
    if (arch_ == "phi3" && (c.boolean("attention_bias", false, what) || c.boolean("mlp_bias", false, what)))
        throw UnsupportedError(what + ": attention_bias / mlp_bias are not supported for phi3");
    if (arch_ == "granite") {
        if (c.boolean("attention_bias", false, what) || c.boolean("mlp_bias", false, what))
            throw UnsupportedError(what + ": Granite with attention_bias or mlp_bias is not supported");
        kv_[a + "embedding_scale"] = gguf_float(c.number("embedding_multiplier", 1.0, what));
        kv_[a + "residual_scale"] = gguf_float(c.number("residual_multiplier", 1.0, what));
        kv_[a + "logit_scale"] = gguf_float(c.number("logits_scaling", 1.0, what));
        kv_[a + "attention.scale"] = gguf_float(c.number("attention_multiplier", 1.0, what));
    }
    if (arch_ == "olmo2" || arch_ == "smollm3") {
        if (c.boolean("use_sliding_window", false, what))
            throw UnsupportedError(what + ": use_sliding_window is not supported for " + arch_);
        if (c.boolean("attention_bias", false, what) || c.boolean("mlp_bias", false, what))
            throw UnsupportedError(what + ": attention_bias / mlp_bias are not supported for " + arch_);
    }
    if (arch_ == "smollm3") {
        const int64_t n_layers = c.integer("num_hidden_layers", 0, what);
        GGUFValue rope;
        rope.type = GGUFType::ARRAY;
        rope.elem_type = GGUFType::INT32;
        const JsonValue* list = c.get("no_rope_layers");
        if (list && list->kind == JsonValue::Kind::Array) {
            if ((int64_t)list->arr.size() != n_layers)
                throw FormatError(what + ": no_rope_layers has " + std::to_string(list->arr.size()) +
                                  " entries for " + std::to_string(n_layers) + " layers");
            for (const JsonValue& v : list->arr) {
                if (!v.is_number()) throw FormatError(what + ": no_rope_layers holds a non-number");
                rope.ints.push_back(v.num != 0);
            }
        } else {
            const int64_t every = c.integer("no_rope_layer_interval", 4, what);
            if (every < 1) throw FormatError(what + ": bad no_rope_layer_interval");
            for (int64_t l = 0; l < n_layers; l++) rope.ints.push_back((l + 1) % every != 0);
        }
        rope.array_len = rope.ints.size();
        kv_["akunu.rope_layers"] = rope;
    }
}

// Mixture of experts as llama.cpp's converter writes it: num_experts (or
// num_local_experts), num_experts_per_tok, moe_intermediate_size,
// shared_expert_intermediate_size, and norm_topk_prob as
// expert_weights_norm (transformers' routing, which llama.cpp fixes per
// family). Every layer must be an MoE layer.
void HFDirectory::read_experts(const std::string& what) {
    const JsonValue& c = config_;
    const std::string a = arch_ + ".";
    int64_t n = c.integer("num_experts", 0, what);
    if (n == 0) n = c.integer("num_local_experts", 0, what);
    if (n <= 0) return;
    if (!c.get("num_experts_per_tok")) throw FormatError(what + " is missing 'num_experts_per_tok'");
    kv_[a + "expert_count"] = gguf_int(n);
    kv_[a + "expert_used_count"] = gguf_int(c.integer("num_experts_per_tok", 0, what));
    if (c.get("moe_intermediate_size"))
        kv_[a + "expert_feed_forward_length"] = gguf_int(c.integer("moe_intermediate_size", 0, what));
    if (c.get("shared_expert_intermediate_size"))
        kv_[a + "expert_shared_feed_forward_length"] = gguf_int(c.integer("shared_expert_intermediate_size", 0, what));
    if (const JsonValue* v = c.get("norm_topk_prob"); v && v->kind != JsonValue::Kind::Null)
        kv_[a + "expert_weights_norm"] = gguf_bool(c.boolean("norm_topk_prob", false, what));
    if (const JsonValue* dense = c.get("mlp_only_layers"); dense && dense->kind == JsonValue::Kind::Array &&
                                                           !dense->arr.empty())
        throw UnsupportedError(what + ": dense layers among the MoE layers (mlp_only_layers) are not supported");
    if (c.integer("decoder_sparse_step", 1, what) != 1)
        throw UnsupportedError(what + ": decoder_sparse_step other than 1 is not supported");
    if (const JsonValue* clip = c.get("clip_qkv"); clip && clip->kind != JsonValue::Kind::Null)
        throw UnsupportedError(what + ": clip_qkv is not supported");
}

// YaRN with transformers' meaning (_compute_yarn_parameters in
// modeling_rope_utils.py): inv_freq_j = inv_interp_j * (1 - E_j) +
// inv_extrap_j * E_j with inv_interp = inv_extrap / factor and E_j = 1 -
// clamp((j - low) / (high - low), 0, 1) over the correction range of
// original_max_position_embeddings with beta_fast / beta_slow (32 / 1;
// floor / ceil unless truncate is false). The divisor inv_extrap_j /
// inv_freq_j goes to `f`. Returns the attention factor (cos and sin
// magnitude): attention_factor, else get_mscale(factor, mscale) /
// get_mscale(factor, mscale_all_dim) when both are set, else
// get_mscale(factor) = 0.1 ln(factor) + 1 (1 for factor <= 1).
// llama.cpp's GGUF meaning differs (always truncated, its own attention
// factor rule): model_config.cpp.
static double yarn_divisors(const JsonValue& rs, const JsonValue& config, double base, size_t n_pairs, float* f,
                            const std::string& what) {
    const int64_t max_pos = config.integer("max_position_embeddings", 2048, what);
    // transformers moves a top-level original_max_position_embeddings (Phi-3) into the RoPE parameters
    const double orig = config.get("original_max_position_embeddings")
                            ? config.number("original_max_position_embeddings", 0, what)
                            : rs.number("original_max_position_embeddings", (double)max_pos, what);
    if (!(orig >= 1 && orig <= (1 << 24))) throw FormatError(what + ": bad original_max_position_embeddings");
    const double factor = rs.number("factor", (double)max_pos / orig, what);
    if (!(factor > 0 && factor <= 1e6)) throw FormatError(what + ": bad YaRN factor");
    if (!(base > 1)) throw FormatError(what + ": YaRN needs rope_theta above 1");
    auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    double attn;
    if (const JsonValue* af = rs.get("attention_factor"); af && af->kind != JsonValue::Kind::Null) {
        attn = rs.number("attention_factor", 1.0, what);
    } else {
        const double ms = rs.number("mscale", 0.0, what), ms_all = rs.number("mscale_all_dim", 0.0, what);
        attn = ms != 0 && ms_all != 0 ? get_mscale(factor, ms) / get_mscale(factor, ms_all) : get_mscale(factor, 1.0);
    }
    if (!(attn > 0 && attn < 1e6)) throw FormatError(what + ": bad YaRN attention factor");
    // `or`: 0 or null means the default, as in transformers
    double beta_fast = rs.number("beta_fast", 0.0, what), beta_slow = rs.number("beta_slow", 0.0, what);
    if (beta_fast == 0) beta_fast = 32;
    if (beta_slow == 0) beta_slow = 1;
    if (!(beta_fast > 0 && beta_slow > 0)) throw FormatError(what + ": YaRN beta_fast / beta_slow must be positive");
    const bool truncate = rs.boolean("truncate", true, what);
    const double dim = 2.0 * (double)n_pairs;  // the head dimension
    auto corr_dim = [&](double rot) { return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(base)); };
    double low = corr_dim(beta_fast), high = corr_dim(beta_slow);
    if (truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
    for (size_t j = 0; j < n_pairs; j++) {
        const double e = 1 - std::min(1.0, std::max(0.0, ((double)j - low) / (high - low)));
        f[j] = (float)(1.0 / ((1 - e) / factor + e));
    }
    return attn;
}

// Frequency-dependent RoPE scaling as per-frequency divisors (what
// llama.cpp's converter stores as rope_freqs.weight for Llama 3.1): Llama
// 3's, or YaRN's (yarn_divisors, with its attention factor as
// rope.scaling.attn_factor, which multiplies cos and sin).
void HFDirectory::add_rope_freqs(const JsonValue& rs, double base) {
    const std::string what = "'" + dir_ + "/config.json' rope_scaling";
    const int64_t hidden = config_.integer("hidden_size", 0, what);
    const int64_t heads = config_.integer("num_attention_heads", 1, what);
    const int64_t head_dim = config_.integer("head_dim", heads > 0 ? hidden / heads : 0, what);
    if (head_dim < 2 || head_dim > 1024) throw FormatError(what + ": bad head dimension");
    if (config_.number("partial_rotary_factor", 1.0, what) != 1.0 || rs.number("partial_rotary_factor", 1.0, what) != 1.0)
        throw UnsupportedError(what + ": partial_rotary_factor other than 1 is not supported");
    const size_t n = (size_t)head_dim / 2;
    float* f = reinterpret_cast<float*>(own(n * 4));
    const std::string type = rs.string("rope_type", rs.string("type", "default", what), what);
    if (type == "yarn") {
        kv_[arch_ + ".rope.scaling.attn_factor"] = gguf_float(yarn_divisors(rs, config_, base, n, f, what));
    } else {
        const double factor = rs.number("factor", 8.0, what);
        const double lo = rs.number("low_freq_factor", 1.0, what);
        const double hi = rs.number("high_freq_factor", 4.0, what);
        const double old_ctx = rs.number("original_max_position_embeddings", 8192, what);
        if (!(factor > 0) || !(hi > lo)) throw FormatError(what + " has invalid factors");
        for (size_t i = 0; i < n; i++) {
            const double freq = 1.0 / std::pow(base, 2.0 * (double)i / (double)head_dim);
            const double wavelen = 2 * M_PI / freq;
            double div;
            if (wavelen < old_ctx / hi) div = 1.0;
            else if (wavelen > old_ctx / lo) div = factor;
            else {
                const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
                div = 1.0 / ((1 - smooth) / factor + smooth);
            }
            f[i] = (float)div;
        }
    }
    GGUFTensorInfo t;
    t.name = "rope_freqs.weight";
    t.shape = {n};
    t.type = GGML_F32;
    t.n_bytes = n * 4;
    t.data = reinterpret_cast<const uint8_t*>(f);
    add_tensor(std::move(t));
}

void HFDirectory::map_tensors() {
    struct Parts {
        const SafeTensor *weight = nullptr, *bias = nullptr, *scales = nullptr, *biases = nullptr;
    };
    std::map<std::string, Parts> modules;  // by HF module path
    bool has_pre_ffn_norm = false;
    for (const auto& shard : shards_)
        for (const SafeTensor& t : shard->tensors()) {
            size_t dot = t.name.rfind('.');
            if (dot == std::string::npos) continue;
            std::string mod = t.name.substr(0, dot), part = t.name.substr(dot + 1);
            Parts& p = modules[mod];
            if (part == "weight" || part == "gamma") p.weight = &t;
            else if (part == "bias" || part == "beta") p.bias = &t;
            else if (part == "scales") p.scales = &t;
            else if (part == "biases") p.biases = &t;
            if (mod.find("pre_feedforward_layernorm") != std::string::npos) has_pre_ffn_norm = true;
        }
    // experts: stacked into one [cols, rows, n] tensor a layer and kind (a copy, in expert order)
    std::map<std::string, std::map<size_t, const SafeTensor*>> experts;
    for (const auto& kv : modules) {
        auto [stack, e] = expert_module(kv.first);
        if (stack.empty()) continue;
        if (kv.second.scales || !kv.second.weight || kv.second.bias)
            throw UnsupportedError("expert '" + kv.first + "': only float expert weights without biases are supported");
        experts[stack][e] = kv.second.weight;
    }
    for (const auto& st : experts) {
        const SafeTensor& first = *st.second.begin()->second;
        const size_t n = st.second.size();
        if (st.second.rbegin()->first != n - 1)
            throw FormatError("tensor '" + first.name + "': the experts of '" + st.first + "' are not numbered 0.." +
                              std::to_string(n - 1));
        if (first.shape.size() != 2 || float_dtype(first.dtype) == UINT32_MAX)
            throw UnsupportedError("tensor '" + first.name + "' is not a float matrix");
        uint8_t* dst = own(first.n_bytes * n);
        for (const auto& ex : st.second) {
            const SafeTensor& t = *ex.second;
            if (t.shape != first.shape || t.dtype != first.dtype || t.n_bytes != first.n_bytes)
                throw FormatError("tensor '" + t.name + "' differs in shape or dtype from '" + first.name + "'");
            std::memcpy(dst + ex.first * first.n_bytes, t.data, t.n_bytes);
        }
        GGUFTensorInfo ti;
        ti.name = st.first + ".weight";
        ti.type = float_dtype(first.dtype);
        ti.shape = {first.shape[1], first.shape[0], (uint64_t)n};
        ti.n_bytes = first.n_bytes * n;
        ti.data = dst;
        add_tensor(std::move(ti));
    }
    if (arch_ == "gpt-oss") map_fused_experts();
    // gpt-oss's post_attention_layernorm is its FFN norm, which its GGUF names post_attention_norm
    const bool post_norm_name = has_pre_ffn_norm || arch_ == "olmo2" || arch_ == "gpt-oss";
    for (const auto& kv : modules) {
        const std::string base =
            arch_ == "whisper" ? whisper_name_from_hf(kv.first) : gguf_module(kv.first, post_norm_name);
        if (base.empty()) continue;
        const Parts& p = kv.second;
        if (p.weight && p.scales) {
            if (!p.biases) throw FormatError("quantized weight '" + kv.first + "' has scales but no biases");
            // MLX: weight [N, K*bits/32] uint32, scales and biases [N, K/group]
            const SafeTensor &w = *p.weight, &s = *p.scales, &b = *p.biases;
            if (w.dtype != "U32" || w.shape.size() != 2 || s.shape.size() != 2 || b.shape != s.shape ||
                s.shape[0] != w.shape[0] || float_dtype(s.dtype) == UINT32_MAX || b.dtype != s.dtype)
                throw FormatError("quantized weight '" + kv.first +
                                  "' does not have MLX's layout (uint32 weight, float scales and biases of one shape)");
            if (quant_.kind != JsonValue::Kind::Object)
                throw FormatError("'" + kv.first + "' is quantized but config.json has no 'quantization'");
            const std::string what = "config.json quantization";
            int64_t group = quant_.integer("group_size", 64, what);
            int64_t bits_cfg = quant_.integer("bits", 4, what);
            if (const JsonValue* o = quant_.get(kv.first); o && o->is_object()) {
                group = o->integer("group_size", group, what);
                bits_cfg = o->integer("bits", bits_cfg, what);
            }
            if (group != 32 && group != 64 && group != 128)
                throw UnsupportedError("MLX group size " + std::to_string(group) + " is not supported (32, 64, 128)");
            const uint64_t N = w.shape[0], n_groups = s.shape[1], K = n_groups * (uint64_t)group;
            if (K == 0 || w.shape[1] * 32 % K != 0)
                throw FormatError("quantized weight '" + kv.first + "': packed width " + std::to_string(w.shape[1]) +
                                  " does not match " + std::to_string(n_groups) + " groups of " +
                                  std::to_string(group));
            const int bits = (int)(w.shape[1] * 32 / K);
            if (bits != bits_cfg)
                throw FormatError("quantized weight '" + kv.first + "' holds " + std::to_string(bits) +
                                  "-bit values but config.json says " + std::to_string(bits_cfg));
            if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 && bits != 8)
                throw UnsupportedError("MLX " + std::to_string(bits) + "-bit weights are not supported");
            const uint32_t dtype = mlx_dtype(bits, (int)group);
            const size_t gbytes = (size_t)group * bits / 8, block = 8 + gbytes;
            uint8_t* dst = own(N * n_groups * block);
            const size_t row_bytes = w.shape[1] * 4;
            for (uint64_t r = 0; r < N; r++)
                for (uint64_t g = 0; g < n_groups; g++) {
                    uint8_t* o = dst + (r * n_groups + g) * block;
                    float sc = read_float(s, r * n_groups + g), bi = read_float(b, r * n_groups + g);
                    std::memcpy(o, &sc, 4);
                    std::memcpy(o + 4, &bi, 4);
                    std::memcpy(o + 8, w.data + r * row_bytes + g * gbytes, gbytes);
                }
            GGUFTensorInfo t;
            t.name = base + ".weight";
            t.shape = {K, N};
            t.type = dtype;
            t.n_bytes = N * n_groups * block;
            t.data = dst;
            add_tensor(std::move(t));
            if (p.bias) {
                GGUFTensorInfo tb;
                tb.name = base + ".bias";
                tb.shape.assign(p.bias->shape.rbegin(), p.bias->shape.rend());
                tb.type = float_dtype(p.bias->dtype);
                tb.n_bytes = p.bias->n_bytes;
                tb.data = p.bias->data;
                if (tb.type == UINT32_MAX) throw UnsupportedError("bias '" + kv.first + "' has dtype " + p.bias->dtype);
                add_tensor(std::move(tb));
            }
            continue;
        }
        for (const SafeTensor* t : {p.weight, p.bias}) {
            if (!t) continue;
            GGUFTensorInfo ti;
            ti.name = base + (t == p.weight ? ".weight" : ".bias");
            ti.type = float_dtype(t->dtype);
            if (ti.type == UINT32_MAX)
                throw UnsupportedError("tensor '" + t->name + "' has dtype " + t->dtype +
                                       " (expected F32, F16 or BF16, or MLX quantized)");
            if (t->shape.empty() || t->shape.size() > 4)
                throw FormatError("tensor '" + t->name + "' has " + std::to_string(t->shape.size()) + " dimensions");
            ti.shape.assign(t->shape.rbegin(), t->shape.rend());  // GGUF order: contiguous dim first
            if (base.size() > 19 && base.compare(base.size() - 19, 19, ".ffn_gate_inp_shexp") == 0 && ti.shape.size() == 2 &&
                ti.shape[1] == 1)
                ti.shape.pop_back();  // [1, dim] in HF, a [dim] vector in GGUF
            ti.n_bytes = t->n_bytes;
            ti.data = t->data;
            if (base.rfind("enc.conv", 0) == 0 && t == p.weight) flatten_conv_weight(ti);
            add_tensor(std::move(ti));
        }
    }
}

// sentence-transformers: pooling mode and whether the embedding is normalized.
void HFDirectory::read_pooling() {
    if (arch_ != "bert") return;
    int pooling = 1;  // mean, as llama.cpp's LLAMA_POOLING_TYPE_MEAN
    const std::string pool_path = dir_ + "/1_Pooling/config.json";
    if (file_exists(pool_path)) {
        JsonValue p = read_json_file(pool_path);
        const std::string what = "'" + pool_path + "'";
        if (p.boolean("pooling_mode_cls_token", false, what)) pooling = 2;
        else if (p.boolean("pooling_mode_lasttoken", false, what)) pooling = 3;
        else if (p.boolean("pooling_mode_max_tokens", false, what) ||
                 p.boolean("pooling_mode_mean_sqrt_len_tokens", false, what))
            throw UnsupportedError(what + ": only mean, CLS and last-token pooling are supported");
    }
    kv_["bert.pooling_type"] = gguf_int(pooling);
    bool normalize = false;
    if (file_exists(dir_ + "/modules.json")) {
        JsonValue m = read_json_file(dir_ + "/modules.json");
        for (const JsonValue& e : m.arr)
            if (e.string("type", "", "modules.json").find("Normalize") != std::string::npos) normalize = true;
    }
    kv_["akunu.normalize_embeddings"] = gguf_bool(normalize);
    if (file_exists(dir_ + "/sentence_bert_config.json")) {
        JsonValue sb = read_json_file(dir_ + "/sentence_bert_config.json");
        int64_t max_len = sb.integer("max_seq_length", 0, "sentence_bert_config.json");
        if (max_len > 0) kv_["akunu.max_seq_length"] = gguf_int(max_len);
    }
}

}  // namespace akunu
