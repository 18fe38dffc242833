#include "text/tokenizer/pipeline.h"

namespace akunu::text::tok {

std::vector<int32_t> Pipeline::encode(const std::string& text, bool add_special) const {
    std::vector<Piece> pieces = added.extract_and_normalize(normalizer.get(), text);
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
    std::vector<int32_t> ids;
    if (add_special && post.present) ids = post.before;
    for (const Piece& p : pieces) {
        if (p.token >= 0) ids.push_back(p.token);
        else model->tokenize(p.text.utf8(), ids);
    }
    if (add_special && post.present) ids.insert(ids.end(), post.after.begin(), post.after.end());
    return ids;
}

const std::string* Pipeline::id_to_string(int32_t id) const {
    if (const std::string* s = added.decode_string(id)) return s;
    return model->id_to_token(id);
}

std::optional<int32_t> Pipeline::token_to_id(const std::string& t) const {
    if (auto a = added.token_to_id(t)) return a;
    return model->token_to_id(t);
}

std::string Pipeline::decode(const std::vector<int32_t>& ids, bool skip_special) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
        const std::string* s = id_to_string(id);
        if (!s || (skip_special && added.is_special(*s))) continue;  // unknown ids are left out, as HF does
        tokens.push_back(*s);
    }
    if (!decoder) {
        std::string out;
        for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
        return out;
    }
    decoder->decode_chain(tokens);
    std::string out;
    for (auto& t : tokens) out += t;
    return out;
}

}  // namespace akunu::text::tok
