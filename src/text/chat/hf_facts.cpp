// hf_chat_facts: HFTokenizer's view of a model directory (python/akunu/hf_tokenizer.py).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "text/chat/model_facts.h"
#include "weight/json.h"

namespace akunu::text {
namespace {

struct Stamp {
    bool exists = false;
    int64_t size = 0, mtime_ns = 0;
    bool operator==(const Stamp& o) const { return exists == o.exists && size == o.size && mtime_ns == o.mtime_ns; }
};

Stamp stamp_of(const std::string& path) {
    struct stat st;
    Stamp s;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return s;
    s.exists = true;
    s.size = (int64_t)st.st_size;
#ifdef __APPLE__
    const struct timespec& t = st.st_mtimespec;
#else
    const struct timespec& t = st.st_mtim;
#endif
    s.mtime_ns = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    return s;
}

JsonValue read_if_there(const std::string& path, const Stamp& st) {
    if (!st.exists) return JsonValue();
    return read_json_file(path);
}

std::optional<int64_t> json_int(const JsonValue* v) {
    if (!v || !v->is_number() || !std::isfinite(v->num) || v->num != std::floor(v->num)) return std::nullopt;
    if (std::fabs(v->num) > 9.0e18) return std::nullopt;
    return (int64_t)v->num;
}

// tokenizer_config's bos_token / eos_token: a string or an AddedToken object.
std::optional<std::string> token_text(const JsonValue* v) {
    if (!v) return std::nullopt;
    if (v->is_string()) return v->str;
    if (v->is_object()) {
        const JsonValue* c = v->get("content");
        if (c && c->is_string()) return c->str;
    }
    return std::nullopt;
}

// tokenizer.json: the model's vocabulary (an object for BPE / WordPiece /
// WordLevel, [piece, score] pairs for Unigram) with the added tokens on top,
// as spelling -> id. Returns the vocabulary size Python sees (largest id + 1).
size_t read_ids(const JsonValue& spec, std::map<std::string, int64_t>& ids) {
    auto put = [&](const std::string& t, int64_t id) {
        if (id >= 0) ids[t] = id;
    };
    if (const JsonValue* model = spec.get("model")) {
        if (const JsonValue* vocab = model->get("vocab")) {
            if (vocab->is_object()) {
                for (const auto& [t, id] : vocab->obj)
                    if (auto i = json_int(&id)) put(t, *i);
            } else if (vocab->kind == JsonValue::Kind::Array) {
                for (size_t i = 0; i < vocab->arr.size(); i++) {
                    const JsonValue& e = vocab->arr[i];
                    if (e.kind == JsonValue::Kind::Array && !e.arr.empty() && e.arr[0].is_string())
                        put(e.arr[0].str, (int64_t)i);
                }
            }
        }
    }
    if (const JsonValue* added = spec.get("added_tokens"); added && added->kind == JsonValue::Kind::Array) {
        for (const JsonValue& a : added->arr) {
            const JsonValue* c = a.get("content");
            auto id = json_int(a.get("id"));
            if (c && c->is_string() && id) put(c->str, *id);
        }
    }
    int64_t n = 0;
    for (const auto& [t, id] : ids) n = std::max(n, id + 1);
    return (size_t)n;
}

// The spelling of token `id` (Python's tokens[id]); "" when none has it.
std::string spelling_of(const std::map<std::string, int64_t>& ids, std::optional<int64_t> id) {
    if (!id) return "";
    for (const auto& [t, i] : ids)
        if (i == *id) return t;
    return "";
}

// HFTokenizer._special_id: the id of tokenizer_config's token text, else config.json's id.
std::optional<int64_t> special_id(const JsonValue& config, const JsonValue& model_cfg, const char* key,
                                  const char* id_key, const std::map<std::string, int64_t>& ids, size_t n_tokens) {
    if (auto text = token_text(config.get(key))) {
        auto it = ids.find(*text);
        if (it != ids.end()) return it->second;
    }
    const JsonValue* fb = model_cfg.get(id_key);
    if (fb && fb->kind == JsonValue::Kind::Array) fb = fb->arr.empty() ? nullptr : &fb->arr[0];
    auto id = json_int(fb);
    if (id && *id >= 0 && (uint64_t)*id < n_tokens) return id;
    return std::nullopt;
}

ModelChatFacts read_hf_facts(const std::string& dir, const Stamp& tok, const Stamp& cfg, const Stamp& model) {
    std::map<std::string, int64_t> ids;
    size_t n_tokens;
    {
        JsonValue spec = read_if_there(dir + "/tokenizer.json", tok);
        n_tokens = read_ids(spec, ids);
    }
    JsonValue config = read_if_there(dir + "/tokenizer_config.json", cfg);
    JsonValue model_cfg = read_if_there(dir + "/config.json", model);
    ModelChatFacts f;
    f.bos_token = spelling_of(ids, special_id(config, model_cfg, "bos_token", "bos_token_id", ids, n_tokens));
    f.eos_token = spelling_of(ids, special_id(config, model_cfg, "eos_token", "eos_token_id", ids, n_tokens));
    // The facts are kept past this call: only the two markers' presence is kept.
    const bool gemma = ids.count("<start_of_turn>") > 0, llama3 = ids.count("<|start_header_id|>") > 0;
    f.has_token = [gemma, llama3](const std::string& t) {
        return (t == "<start_of_turn>" && gemma) || (t == "<|start_header_id|>" && llama3);
    };
    if (const JsonValue* t = config.get("chat_template"); t && t->is_string()) f.chat_template = t->str;
    return f;
}

struct Entry {
    Stamp tok, cfg, model;
    ModelChatFacts facts;
};

}  // namespace

ModelChatFacts hf_chat_facts(const std::string& directory) {
    static std::mutex mu;
    static std::map<std::string, Entry> cache;
    const Stamp tok = stamp_of(directory + "/tokenizer.json");
    const Stamp cfg = stamp_of(directory + "/tokenizer_config.json");
    const Stamp model = stamp_of(directory + "/config.json");
    {
        std::lock_guard<std::mutex> l(mu);
        auto it = cache.find(directory);
        if (it != cache.end() && it->second.tok == tok && it->second.cfg == cfg && it->second.model == model)
            return it->second.facts;
    }
    Entry e{tok, cfg, model, read_hf_facts(directory, tok, cfg, model)};
    std::lock_guard<std::mutex> l(mu);
    if (cache.size() >= 16) cache.clear();  // a few directories per process in practice
    cache[directory] = e;
    return e.facts;
}

}  // namespace akunu::text
