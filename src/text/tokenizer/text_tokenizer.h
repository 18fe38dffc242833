// akunu::text::Tokenizer over a Pipeline, with the Python package's view of
// the vocabulary (GGUF-style token types, the tokenizer family, BOS / EOS).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "text/tokenizer.h"
#include "text/tokenizer/pipeline.h"
#include "weight/model_file.h"

namespace akunu::text::tok {

// llama.cpp's token types
enum TokenType { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

struct Vocabulary {
    std::string kind;  // "llama", "gpt2" or "bert"
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    int32_t bos = -1, eos = -1;
    // GGUF llama / gpt2 encode without the post-processor and put BOS in front
    // themselves (when add_bos); GGUF bert and tokenizer.json use the post-processor
    bool own_bos = false;
    bool add_bos = false;
    bool hf_directory = false;
};

class TextTokenizer : public Tokenizer {
public:
    TextTokenizer(Pipeline p, Vocabulary v);

    int32_t vocab_size() const override { return int32_t(v_.tokens.size()); }
    std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
    std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override;
    std::string token_bytes(int32_t id) const override;
    std::string_view token_bytes_view(int32_t id) const override;
    bool is_text_token(int32_t id) const override;
    std::string token_text(int32_t id) const override;
    int32_t bos_id() const override { return v_.bos; }
    int32_t eos_id() const override { return v_.eos; }
    std::string kind() const override { return v_.kind; }

private:
    std::string piece_bytes(int32_t id) const;

    Pipeline p_;
    Vocabulary v_;
    std::vector<std::string> bytes_;
};

// Built as the Python package builds them (akunu/tokenizer.py, akunu/hf_tokenizer.py).
std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const std::map<std::string, GGUFValue>& metadata);
std::shared_ptr<const Tokenizer> tokenizer_from_hf_directory(const std::string& dir);

}  // namespace akunu::text::tok
