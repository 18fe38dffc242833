// The text handed to the C API's token callbacks (streaming and grammar-
// constrained generation), shared by their translation units.
#pragma once
#include <exception>
#include <string>

#include "handle.h"

namespace akunu_c {

// The text of each token for the callback: the token's bytes, with a UTF-8
// character split across tokens held back until its last byte arrives (a
// piece is always whole characters, possibly empty). NULL where the model's
// tokenizer cannot be built.
class TokenText {
public:
    TokenText(akunu_model& h, bool wanted) {
        if (!wanted) return;
        try {
            tok_ = &tokenizer_of(h);
        } catch (const std::exception&) {
            tok_ = nullptr;
        }
    }
    const char* piece(int32_t id) {
        if (!tok_) return nullptr;
        // ids past the tokenizer's vocabulary (a padded output head) stand for no text
        if (id >= 0 && id < tok_->vocab_size()) pending_ += tok_->token_bytes(id);
        size_t whole = complete_prefix(pending_);
        out_.assign(pending_, 0, whole);
        pending_.erase(0, whole);
        return out_.c_str();
    }

private:
    // Length of the longest prefix that ends on a character boundary: an
    // incomplete sequence at the end waits; invalid bytes pass as they are.
    static size_t complete_prefix(const std::string& s) {
        const size_t n = s.size();
        for (size_t back = 1; back <= 3 && back <= n; back++) {
            const unsigned char c = (unsigned char)s[n - back];
            if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
            const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            return len > back && c >= 0xC0 && c < 0xF8 ? n - back : n;
        }
        return n;
    }

    const akunu::text::Tokenizer* tok_ = nullptr;
    std::string pending_, out_;
};

}  // namespace akunu_c
