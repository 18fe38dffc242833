// What chat formatting needs from a model besides its weights: the template
// its files carry, the spellings of its BOS / EOS tokens and whether its
// vocabulary has the turn markers that choose a built-in template. Read as
// the Python package reads them (GGUFTokenizer, HFTokenizer,
// ChatTemplate.for_model).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace akunu {
class ModelFile;
}

namespace akunu::text {

struct ModelChatFacts {
    std::optional<std::string> chat_template;  // tokenizer.chat_template, when a string
    std::string bos_token, eos_token;          // tokens[id], "" for a missing or out-of-range id
    // Whether a spelling is in the vocabulary; asked only when the model has
    // no template (a scan of the vocabulary), valid while its source lives.
    std::function<bool(const std::string&)> has_token;
};

// tokens[id], or "" for a missing or out-of-range id (ChatTemplate.for_model's tok()).
std::string token_at(const std::vector<std::string>& tokens, std::optional<int64_t> id);

// From GGUF metadata: tokenizer.chat_template, tokenizer.ggml.tokens,
// tokenizer.ggml.bos_token_id / eos_token_id. Missing keys leave fields
// empty. has_token reads the file's vocabulary: use the facts while `file` lives.
ModelChatFacts gguf_chat_facts(const ModelFile& file);

// From a Hugging Face / MLX directory: tokenizer.json's vocabulary and added
// tokens, tokenizer_config.json's chat_template and bos_token / eos_token,
// config.json's bos_token_id / eos_token_id as fallbacks (hf_facts.cpp).
// Kept per directory, read again when one of the three files changes.
ModelChatFacts hf_chat_facts(const std::string& directory);

}  // namespace akunu::text
