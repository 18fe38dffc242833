#include "text/grammar/stop_tokens.h"

#include <set>
#include <string>

namespace akunu::text {
namespace {

// python/akunu/model.py's _END_OF_GENERATION
const std::set<std::string>& end_of_generation_spellings() {
    static const std::set<std::string> s = {
        "<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<|eom_id|>",
        "</s>", "<eos>", "<|end_of_text|>",
    };
    return s;
}

bool is_integer(const GGUFValue& v) {
    switch (v.type) {
        case GGUFType::STRING: case GGUFType::ARRAY: case GGUFType::FLOAT32: case GGUFType::FLOAT64: return false;
        default: return true;
    }
}

}  // namespace

std::vector<int32_t> end_of_generation_ids(const Tokenizer& tok, const ModelFile& file) {
    const int32_t n = tok.vocab_size();
    std::set<int32_t> ids;
    for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                            "tokenizer.ggml.eom_token_id"}) {
        const GGUFValue* v = file.find(key);
        if (v && is_integer(*v) && v->i >= 0 && v->i < n) ids.insert((int32_t)v->i);
    }
    // A model directory's EOS comes from its tokenizer files (Python adds it to the metadata).
    if (std::string(file.format()) != "gguf" && !file.has("tokenizer.ggml.eos_token_id") && tok.eos_id() >= 0 &&
        tok.eos_id() < n)
        ids.insert(tok.eos_id());
    const auto& names = end_of_generation_spellings();
    for (int32_t i = 0; i < n; i++)
        if (!tok.is_text_token(i) && names.count(tok.token_text(i))) ids.insert(i);
    return std::vector<int32_t>(ids.begin(), ids.end());
}

}  // namespace akunu::text
