#include "text/tokenizer/added_vocab.h"

#include <algorithm>
#include <tuple>

#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {
namespace {

namespace u = akunu::text::unicode;

// The code point ending just before byte `pos` / starting at `pos` (valid UTF-8).
char32_t cp_before(const std::string& s, size_t pos) {
    size_t i = pos;
    do --i;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
    return u::decode_utf8(std::string_view(s).substr(i, pos - i))[0];
}
char32_t cp_at(const std::string& s, size_t pos) {
    unsigned char c = (unsigned char)s[pos];
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    return u::decode_utf8(std::string_view(s).substr(pos, len))[0];
}

}  // namespace

void AddedVocabulary::Trie::insert(const std::string& s, int32_t id) {
    int n = 0;
    for (unsigned char c : s) {
        auto& nx = nodes[size_t(n)].next;
        auto it = std::find_if(nx.begin(), nx.end(), [c](auto& p) { return p.first == c; });
        if (it == nx.end()) {
            nodes.emplace_back();
            nodes[size_t(n)].next.emplace_back(c, int(nodes.size()) - 1);
            n = int(nodes.size()) - 1;
        } else {
            n = it->second;
        }
    }
    nodes[size_t(n)].id = id;
}

std::vector<std::tuple<size_t, size_t, int32_t>> AddedVocabulary::Trie::find(const std::string& s) const {
    std::vector<std::tuple<size_t, size_t, int32_t>> out;
    for (size_t i = 0; i < s.size();) {
        int n = 0;
        size_t best_end = 0;
        int32_t best = -1;
        for (size_t j = i; j < s.size(); ++j) {
            auto& nx = nodes[size_t(n)].next;
            unsigned char c = (unsigned char)s[j];
            auto it = std::find_if(nx.begin(), nx.end(), [c](auto& p) { return p.first == c; });
            if (it == nx.end()) break;
            n = it->second;
            if (nodes[size_t(n)].id >= 0) best = nodes[size_t(n)].id, best_end = j + 1;
        }
        if (best >= 0) {
            out.emplace_back(i, best_end, best);
            i = best_end;
        } else {
            ++i;
        }
    }
    return out;
}

void AddedVocabulary::add_tokens(const std::vector<AddedToken>& tokens, const Model& model, const Normalizer* normalizer) {
    // the next new id: after the largest added id when that is past the model's vocabulary
    int64_t vsize = int64_t(model.vocab_entries());
    int64_t next = vsize;
    if (!by_id_.empty()) {
        int32_t mx = std::max_element(by_id_.begin(), by_id_.end(), [](auto& a, auto& b) { return a.first < b.first; })->first;
        next = (mx >= vsize || vsize == 0) ? mx + 1 : vsize;
    }
    for (const AddedToken& t : tokens) {
        if (t.content.empty()) continue;
        auto known = by_content_.find(t.content);
        if (known != by_content_.end()) {
            auto& cur = by_id_[known->second];
            if (cur.content == t.content && cur.single_word == t.single_word && cur.lstrip == t.lstrip &&
                cur.rstrip == t.rstrip && cur.normalized == t.normalized && cur.special == t.special)
                continue;
        }
        int32_t id;
        if (auto a = token_to_id(t.content)) id = *a;
        else if (auto m = model.token_to_id(t.content)) id = *m;
        else id = int32_t(next++);
        if (t.normalized && normalizer) {
            NText n = NText::from_utf8(t.content, 0);
            normalizer->normalize(n);
            std::string s = n.utf8();
            if (s != t.content) normalized_[id] = s;
        }
        by_content_[t.content] = id;
        if (t.special) special_.insert(t.content);
        by_id_[id] = t;
    }
    rebuild();
}

void AddedVocabulary::rebuild() {
    raw_ = Trie();
    norm_ = Trie();
    has_raw_ = has_norm_ = false;
    // ids in ascending order so that equal patterns resolve the same way each time
    std::vector<int32_t> ids;
    for (auto& kv : by_id_) ids.push_back(kv.first);
    std::sort(ids.begin(), ids.end());
    for (int32_t id : ids) {
        const AddedToken& t = by_id_[id];
        if (t.normalized) {
            auto n = normalized_.find(id);
            norm_.insert(n != normalized_.end() ? n->second : t.content, id);
            has_norm_ = true;
        } else {
            raw_.insert(t.content, id);
            has_raw_ = true;
        }
    }
}

std::optional<int32_t> AddedVocabulary::token_to_id(const std::string& c) const {
    auto it = by_content_.find(c);
    if (it == by_content_.end()) return std::nullopt;
    return it->second;
}

const std::string* AddedVocabulary::decode_string(int32_t id) const {
    auto n = normalized_.find(id);
    if (n != normalized_.end()) return &n->second;
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &it->second.content;
}

std::vector<Piece> AddedVocabulary::split(const NText& t, const Trie& trie, bool has) const {
    if (!has || t.empty()) return {{t, -1}};
    std::string s = t.utf8();
    // byte offset -> code point index
    std::vector<size_t> cp_index(s.size() + 1, 0);
    for (size_t b = 0, k = 0; b <= s.size(); ++b) {
        if (b < s.size() && ((unsigned char)s[b] & 0xC0) == 0x80) {
            cp_index[b] = k;
            continue;
        }
        cp_index[b] = k;
        if (b < s.size()) ++k;
    }
    std::vector<Piece> out;
    size_t start_offset = 0;  // bytes
    for (auto [start, stop, id] : trie.find(s)) {
        const AddedToken& tok = by_id_.at(id);
        if (tok.single_word) {
            bool start_space = start == 0 || !u::has(cp_before(s, start), u::WORD);
            bool stop_space = stop == s.size() || !u::has(cp_at(s, stop), u::WORD);
            if (!start_space || !stop_space) continue;
        }
        if (tok.lstrip) {
            size_t ns = start;
            while (ns > 0 && u::has(cp_before(s, ns), u::WHITESPACE)) {
                size_t i = ns;
                do --i;
                while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
                ns = i;
            }
            start = std::max(ns, start_offset);
        }
        if (tok.rstrip) {
            while (stop < s.size() && u::has(cp_at(s, stop), u::WHITESPACE)) {
                unsigned char c = (unsigned char)s[stop];
                stop += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            }
        }
        if (start_offset < start) out.push_back({t.slice(cp_index[start_offset], cp_index[start]), -1});
        out.push_back({t.slice(cp_index[start], cp_index[stop]), id});
        start_offset = stop;
    }
    if (start_offset != s.size()) out.push_back({t.slice(cp_index[start_offset], cp_index[s.size()]), -1});
    return out;
}

std::vector<Piece> AddedVocabulary::extract_and_normalize(const Normalizer* normalizer, const std::string& text) const {
    std::vector<Piece> pieces{{NText::from_utf8(text, 0), -1}};
    split_pieces(pieces, [](const NText& t) { return std::vector<NText>{t}; });  // drops an empty text
    std::vector<Piece> stage;
    for (Piece& p : pieces)
        for (Piece& q : split(p.text, raw_, has_raw_))
            if (!q.text.empty()) stage.push_back(std::move(q));
    std::vector<Piece> out;
    for (Piece& p : stage) {
        if (p.token >= 0) {
            out.push_back(std::move(p));
            continue;
        }
        if (normalizer) normalizer->normalize(p.text);
        for (Piece& q : split(p.text, norm_, has_norm_))
            if (!q.text.empty()) out.push_back(std::move(q));
    }
    return out;
}

}  // namespace akunu::text::tok
