#include "text/grammar/vocabulary.h"

#include <algorithm>

namespace akunu::text {

std::vector<std::string> grammar_vocabulary(const Tokenizer& tok, int model_vocab, bool json_mode) {
    std::vector<std::string> out((size_t)std::max(model_vocab, 0));
    const int32_t n = std::min<int32_t>(tok.vocab_size(), model_vocab);
    for (int32_t i = 0; i < n; i++) {
        if (!tok.is_text_token(i)) continue;
        std::string b = tok.token_bytes(i);
        if (json_mode && std::any_of(b.begin(), b.end(), [](char c) { return (unsigned char)c < 0x20; })) continue;
        out[(size_t)i] = std::move(b);
    }
    return out;
}

}  // namespace akunu::text
