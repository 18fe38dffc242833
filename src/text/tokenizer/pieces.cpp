#include "text/tokenizer/pieces.h"

#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {

NText NText::from_utf8(const std::string& s, uint32_t base) {
    NText t;
    t.shift = base;
    for (size_t i = 0; i < s.size();) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
        t.cps += cp;
        t.orig.push_back(uint32_t(base + i));
        i += len;
    }
    return t;
}

NText NText::slice(size_t a, size_t b) const {
    NText t;
    t.cps = cps.substr(a, b - a);
    t.orig.assign(orig.begin() + a, orig.begin() + b);
    t.shift = a < orig.size() ? orig[a] : shift;
    return t;
}

std::string NText::utf8() const { return unicode::encode_utf8(cps); }

void NText::assign(std::u32string cps2, const std::vector<size_t>& origin) {
    std::vector<uint32_t> o(cps2.size());
    for (size_t i = 0; i < cps2.size(); ++i) o[i] = origin[i] < orig.size() ? orig[origin[i]] : shift;
    cps = std::move(cps2);
    orig = std::move(o);
}

void NText::prepend(const std::u32string& s) {
    if (cps.empty()) return;
    uint32_t first = orig[0];
    cps.insert(0, s);
    orig.insert(orig.begin(), s.size(), first);
}

std::vector<Span> spans_from_matches(size_t n, const std::vector<std::pair<size_t, size_t>>& matches) {
    std::vector<Span> out;
    if (n == 0) return {{0, 0, false}};
    size_t prev = 0;
    for (auto& m : matches) {
        if (prev != m.first) out.push_back({prev, m.first, false});
        out.push_back({m.first, m.second, true});
        prev = m.second;
    }
    if (prev != n) out.push_back({prev, n, false});
    return out;
}

std::vector<Span> spans_from_chars(const std::u32string& s, const std::function<bool(char32_t)>& pred) {
    if (s.empty()) return {{0, 0, false}};
    std::vector<Span> out;
    size_t last = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (pred(s[i])) {
            if (last < i) out.push_back({last, i, false});
            out.push_back({i, i + 1, true});
            last = i + 1;
        }
    }
    if (last < s.size()) out.push_back({last, s.size(), false});
    return out;
}

std::vector<NText> split_spans(const NText& t, std::vector<Span> spans, SplitBehavior behavior, bool invert) {
    if (invert)
        for (auto& s : spans) s.match = !s.match;
    // (start, end, remove)
    struct Cut {
        size_t start, end;
        bool remove;
    };
    std::vector<Cut> cuts;
    switch (behavior) {
        case SplitBehavior::Isolated:
            for (auto& s : spans) cuts.push_back({s.start, s.end, false});
            break;
        case SplitBehavior::Removed:
            for (auto& s : spans) cuts.push_back({s.start, s.end, s.match});
            break;
        case SplitBehavior::Contiguous: {
            bool prev = false;
            for (auto& s : spans) {
                if (s.match == prev && !cuts.empty()) cuts.back().end = s.end;
                else cuts.push_back({s.start, s.end, false});
                prev = s.match;
            }
            break;
        }
        case SplitBehavior::MergedWithPrevious: {
            bool prev = false;
            for (auto& s : spans) {
                if (s.match && !prev && !cuts.empty()) cuts.back().end = s.end;
                else cuts.push_back({s.start, s.end, false});
                prev = s.match;
            }
            break;
        }
        case SplitBehavior::MergedWithNext: {
            bool prev = false;
            for (size_t k = spans.size(); k-- > 0;) {
                const Span& s = spans[k];
                if (s.match && !prev && !cuts.empty()) cuts.back().start = s.start;
                else cuts.push_back({s.start, s.end, false});
                prev = s.match;
            }
            std::vector<Cut> rev(cuts.rbegin(), cuts.rend());
            cuts.swap(rev);
            break;
        }
    }
    std::vector<NText> out;
    for (auto& c : cuts)
        if (!c.remove) out.push_back(t.slice(c.start, c.end));
    return out;
}

void split_pieces(std::vector<Piece>& pieces, const std::function<std::vector<NText>(const NText&)>& fn) {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    for (Piece& p : pieces) {
        if (p.token >= 0) {
            out.push_back(std::move(p));
            continue;
        }
        for (NText& t : fn(p.text))
            if (!t.empty()) out.push_back({std::move(t), -1});
    }
    pieces.swap(out);
}

}  // namespace akunu::text::tok
