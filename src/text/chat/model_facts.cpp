// The GGUF reader of a model's chat facts.
#include "text/chat/model_facts.h"

#include <algorithm>

#include "weight/model_file.h"

namespace akunu::text {

std::string token_at(const std::vector<std::string>& tokens, std::optional<int64_t> id) {
    if (!id || *id < 0 || (uint64_t)*id >= tokens.size()) return "";
    return tokens[(size_t)*id];
}

namespace {

// An integer-typed metadata value (Python sees an int; a bool is one too);
// anything else counts as absent.
std::optional<int64_t> int_value(const ModelFile& file, const char* key) {
    const GGUFValue* v = file.find(key);
    if (!v) return std::nullopt;
    switch (v->type) {
        case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::UINT16: case GGUFType::INT16:
        case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::INT64: case GGUFType::BOOL:
            return v->i;
        case GGUFType::UINT64:
            return v->u > (uint64_t)INT64_MAX ? -1 : (int64_t)v->u;  // -1: no token
        default:
            return std::nullopt;
    }
}

}  // namespace

ModelChatFacts gguf_chat_facts(const ModelFile& file) {
    static const std::vector<std::string> none;
    const GGUFValue* toks = file.find("tokenizer.ggml.tokens");
    const std::vector<std::string>& tokens = toks && toks->type == GGUFType::ARRAY ? toks->strings : none;
    ModelChatFacts f;
    f.bos_token = token_at(tokens, int_value(file, "tokenizer.ggml.bos_token_id"));
    f.eos_token = token_at(tokens, int_value(file, "tokenizer.ggml.eos_token_id"));
    f.has_token = [&tokens](const std::string& t) {
        return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
    };
    if (const GGUFValue* t = file.find("tokenizer.chat_template"); t && t->type == GGUFType::STRING)
        f.chat_template = t->s;
    return f;
}

}  // namespace akunu::text
