#include "text/tokenizer/text_tokenizer.h"

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {

TextTokenizer::TextTokenizer(Pipeline p, Vocabulary v) : p_(std::move(p)), v_(std::move(v)) {
    bytes_.resize(v_.tokens.size());
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = piece_bytes(int32_t(i));
}

std::vector<int32_t> TextTokenizer::encode(std::string_view text, bool add_special) const {
    if (!unicode::valid_utf8(text)) throw Error("tokenizer: the text is not valid UTF-8");
    std::string s(text);
    if (!v_.own_bos) return p_.encode(s, add_special);
    std::vector<int32_t> ids = p_.encode(s, false);
    if (add_special && v_.add_bos && v_.bos >= 0) ids.insert(ids.begin(), v_.bos);
    return ids;
}

std::string TextTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    return p_.decode(ids, skip_special);
}

// The Python package's TokenizerBase.token_bytes; unused tokens stand for no text.
std::string TextTokenizer::piece_bytes(int32_t id) const {
    const std::string& piece = v_.tokens[size_t(id)];
    int32_t ty = v_.types[size_t(id)];
    if (ty == CONTROL || ty == UNUSED) return "";
    if (v_.kind == "gpt2") {
        std::string raw;
        return byte_level_to_bytes(piece, raw) ? raw : piece;
    }
    if (ty == BYTE && piece.size() >= 4 && piece.compare(0, 3, "<0x") == 0 && piece.back() == '>') {
        try {
            size_t used = 0;
            std::string hex = piece.substr(3, piece.size() - 4);
            unsigned long b = std::stoul(hex, &used, 16);
            if (used == hex.size() && b < 256) return std::string(1, char(b));
        } catch (const std::exception&) {
        }
    }
    if (v_.kind == "bert" && v_.hf_directory) {
        if (piece.compare(0, 2, "##") == 0) return piece.substr(2);
        return " " + piece;
    }
    // SentencePiece's U+2581 is a space
    std::string out;
    const std::string meta = "\xE2\x96\x81";
    for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, 3, meta) == 0) {
            out += ' ';
            i += 3;
        } else {
            out += piece[i++];
        }
    }
    return out;
}

std::string TextTokenizer::token_bytes(int32_t id) const { return std::string(token_bytes_view(id)); }

std::string_view TextTokenizer::token_bytes_view(int32_t id) const {
    if (id < 0 || size_t(id) >= bytes_.size()) return {};
    return bytes_[size_t(id)];
}

bool TextTokenizer::is_text_token(int32_t id) const {
    if (id < 0 || size_t(id) >= v_.types.size()) return false;
    int32_t t = v_.types[size_t(id)];
    return t == NORMAL || t == USER_DEFINED || t == BYTE;
}

std::string TextTokenizer::token_text(int32_t id) const {
    if (id < 0 || size_t(id) >= v_.tokens.size()) return "";
    return v_.tokens[size_t(id)];
}

}  // namespace akunu::text::tok
