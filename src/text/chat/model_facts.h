// What chat formatting needs from a model besides its weights: the template
// its files carry, the spellings of its BOS / EOS tokens and whether its
// vocabulary has the turn markers that choose a built-in template. Read as
// the Python package reads them (GGUFTokenizer, HFTokenizer,
// ChatTemplate.for_model).
#pragma once
#include <cstdint>
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
    bool has_start_of_turn = false;            // "<start_of_turn>" is a token (Gemma)
    bool has_start_header_id = false;          // "<|start_header_id|>" is a token (Llama 3)
};

// The facts of a vocabulary given by its spellings (tokens[id]) and special ids.
ModelChatFacts chat_facts(const std::vector<std::string>& tokens, std::optional<int64_t> bos_id,
                          std::optional<int64_t> eos_id);

// From GGUF metadata: tokenizer.chat_template, tokenizer.ggml.tokens,
// tokenizer.ggml.bos_token_id / eos_token_id. Missing keys leave fields empty.
ModelChatFacts gguf_chat_facts(const ModelFile& file);

// From a Hugging Face / MLX directory: tokenizer.json's vocabulary and added
// tokens, tokenizer_config.json's chat_template and bos_token / eos_token,
// config.json's bos_token_id / eos_token_id as fallbacks (hf_facts.cpp).
// Kept per directory, read again when one of the three files changes.
ModelChatFacts hf_chat_facts(const std::string& directory);

}  // namespace akunu::text
