#include "weight/whisper_names.h"

#include "core/error.h"

namespace akunu {

std::string whisper_name_from_hf(const std::string& module) {
    std::string m = module;
    if (m.rfind("model.", 0) == 0) m = m.substr(6);
    static const std::map<std::string, std::string> top = {
        {"encoder.conv1", "enc.conv1"},
        {"encoder.conv2", "enc.conv2"},
        {"encoder.embed_positions", "enc.position_embd"},
        {"encoder.layer_norm", "enc.output_norm"},
        {"decoder.embed_tokens", "token_embd"},
        {"decoder.embed_positions", "position_embd"},
        {"decoder.layer_norm", "output_norm"},
    };
    if (auto it = top.find(m); it != top.end()) return it->second;
    std::string prefix;
    if (m.rfind("encoder.layers.", 0) == 0) prefix = "enc.blk.";
    else if (m.rfind("decoder.layers.", 0) == 0) prefix = "blk.";
    else return "";  // proj_out (tied to the token embedding)
    std::string tail = m.substr(m.find("layers.") + 7);
    size_t dot = tail.find('.');
    if (dot == std::string::npos || dot == 0 || dot > 6) return "";
    for (size_t i = 0; i < dot; i++)
        if (tail[i] < '0' || tail[i] > '9') return "";
    const std::string layer = tail.substr(0, dot), rest = tail.substr(dot + 1);
    static const std::map<std::string, std::string> in_layer = {
        {"self_attn_layer_norm", "attn_norm"},
        {"self_attn.q_proj", "attn_q"},
        {"self_attn.k_proj", "attn_k"},
        {"self_attn.v_proj", "attn_v"},
        {"self_attn.out_proj", "attn_output"},
        {"encoder_attn_layer_norm", "cross_attn_norm"},
        {"encoder_attn.q_proj", "cross_attn_q"},
        {"encoder_attn.k_proj", "cross_attn_k"},
        {"encoder_attn.v_proj", "cross_attn_v"},
        {"encoder_attn.out_proj", "cross_attn_output"},
        {"final_layer_norm", "ffn_norm"},
        {"fc1", "ffn_up"},
        {"fc2", "ffn_down"},
    };
    auto it = in_layer.find(rest);
    return it == in_layer.end() ? "" : prefix + layer + "." + it->second;
}

void whisper_metadata_from_hf(const JsonValue& c, const JsonValue* gen, std::map<std::string, GGUFValue>& kv,
                              const std::string& what) {
    auto need = [&](const char* key) {
        if (!c.get(key)) throw FormatError(what + " is missing '" + key + "'");
        return c.integer(key, 0, what);
    };
    const int64_t d = need("d_model");
    kv["whisper.n_mels"] = gguf_int(need("num_mel_bins"));
    kv["whisper.encoder.context_length"] = gguf_int(need("max_source_positions"));
    kv["whisper.encoder.embedding_length"] = gguf_int(d);
    kv["whisper.encoder.block_count"] = gguf_int(need("encoder_layers"));
    kv["whisper.encoder.attention.head_count"] = gguf_int(need("encoder_attention_heads"));
    kv["whisper.encoder.feed_forward_length"] = gguf_int(need("encoder_ffn_dim"));
    kv["whisper.context_length"] = gguf_int(need("max_target_positions"));
    kv["whisper.embedding_length"] = gguf_int(d);
    kv["whisper.block_count"] = gguf_int(need("decoder_layers"));
    kv["whisper.attention.head_count"] = gguf_int(need("decoder_attention_heads"));
    kv["whisper.feed_forward_length"] = gguf_int(need("decoder_ffn_dim"));
    kv["whisper.attention.layer_norm_epsilon"] = gguf_float(1e-5);  // nn.LayerNorm's default
    const std::string act = c.string("activation_function", "gelu", what);
    if (act != "gelu") throw UnsupportedError(what + ": Whisper activation '" + act + "' is not supported (gelu)");
    // Token suppression lists: generation_config.json wins over config.json (older exports).
    for (const char* key : {"suppress_tokens", "begin_suppress_tokens"})
        put_token_ids(gen && gen->get(key) ? gen->get(key) : c.get(key), std::string("whisper.") + key, what, kv);
}

void put_token_ids(const JsonValue* v, const std::string& key, const std::string& what,
                   std::map<std::string, GGUFValue>& kv) {
    if (!v || v->kind != JsonValue::Kind::Array) return;
    std::vector<int64_t> ids;
    for (const JsonValue& e : v->arr) {
        if (!e.is_number() || !(e.num >= -1 && e.num < 1e9))
            throw FormatError(what + ": a suppression list holds something other than a token id");
        ids.push_back((int64_t)e.num);
    }
    kv[key] = gguf_int_array(ids);
}

void flatten_conv_weight(GGUFTensorInfo& t) {
    if (t.shape.size() != 3) throw FormatError("convolution weight '" + t.name + "' is not 3-dimensional");
    t.shape = {t.shape[0] * t.shape[1], t.shape[2]};
}

}  // namespace akunu
