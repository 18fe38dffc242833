// BPE as HF `tokenizers` runs it (models/bpe): characters looked up one by
// one (byte fallback, unknown-token fusing), then merges applied lowest rank
// first from a priority queue, the leftmost of equal ranks first.
#include <cstdio>
#include <queue>

#include "core/error.h"
#include "text/tokenizer/model.h"

namespace akunu::text::tok {

std::optional<int32_t> Model::token_to_id(const std::string& t) const {
    auto it = vocab_.find(t);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
}

const std::string* Model::id_to_token(int32_t id) const {
    auto it = vocab_r_.find(id);
    return it == vocab_r_.end() ? nullptr : &it->second;
}

void Model::set_vocab(std::unordered_map<std::string, int32_t> v) {
    vocab_ = std::move(v);
    vocab_r_.clear();
    vocab_r_.reserve(vocab_.size());
    for (auto& kv : vocab_) vocab_r_[kv.second] = kv.first;
}

namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

struct MergeInfo {
    uint32_t rank;
    int32_t new_id;
};

class Bpe : public Model {
public:
    Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
        BpeOptions opt)
        : opt_(std::move(opt)) {
        set_vocab(std::move(vocab));
        size_t prefix_len = opt_.continuing_subword_prefix ? opt_.continuing_subword_prefix->size() : 0;
        std::vector<MergeIds> ids;
        ids.reserve(merges.size());
        for (const auto& [a, b] : merges) {
            auto ia = vocab_.find(a), ib = vocab_.find(b);
            if (ia == vocab_.end()) throw FormatError("BPE merge token '" + a + "' is not in the vocabulary");
            if (ib == vocab_.end()) throw FormatError("BPE merge token '" + b + "' is not in the vocabulary");
            std::string joined = a + (b.size() >= prefix_len ? b.substr(prefix_len) : std::string());
            auto in = vocab_.find(joined);
            if (in == vocab_.end()) throw FormatError("BPE merge result '" + joined + "' is not in the vocabulary");
            ids.push_back({ia->second, ib->second, in->second});
        }
        init(ids);
    }
    Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<MergeIds>& merges, BpeOptions opt)
        : opt_(std::move(opt)) {
        set_vocab(std::move(vocab));
        init(merges);
    }

    void init(const std::vector<MergeIds>& merges) {
        merges_.reserve(merges.size());
        // a later duplicate replaces an earlier one, as collecting into a map does
        for (size_t i = 0; i < merges.size(); ++i)
            merges_[pair_key(merges[i].a, merges[i].b)] = {uint32_t(i), merges[i].result};
        if (opt_.unk_token) {
            auto it = vocab_.find(*opt_.unk_token);
            unk_id_ = it == vocab_.end() ? -1 : it->second;
        }
        if (opt_.byte_fallback) {
            for (int b = 0; b < 256; ++b) {
                char name[8];
                std::snprintf(name, sizeof name, "<0x%02X>", b);
                auto it = vocab_.find(name);
                byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
            }
        }
    }

    void tokenize(const std::string& w, std::vector<int32_t>& out) const override {
        if (w.empty()) return;
        if (opt_.ignore_merges) {
            auto it = vocab_.find(w);
            if (it != vocab_.end()) {
                out.push_back(it->second);
                return;
            }
        }
        std::vector<Symbol> syms;
        syms.reserve(w.size());
        int32_t unk = -1;
        size_t unk_len = 0;
        auto add = [&](int32_t id, size_t len) {
            int prev = syms.empty() ? -1 : int(syms.size()) - 1;
            if (!syms.empty()) syms.back().next = int(syms.size());
            syms.push_back({id, prev, -1, len});
        };
        for (size_t i = 0; i < w.size();) {
            unsigned char c = (unsigned char)w[i];
            size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            bool first = i == 0, last = i + len >= w.size();
            std::string s = w.substr(i, len);
            if (!first && opt_.continuing_subword_prefix) s = *opt_.continuing_subword_prefix + s;
            if (last && opt_.end_of_word_suffix) s += *opt_.end_of_word_suffix;
            i += len;
            auto it = vocab_.find(s);
            if (it != vocab_.end()) {
                if (unk >= 0) {
                    add(unk, unk_len);
                    unk = -1;
                }
                add(it->second, len);
                continue;
            }
            if (opt_.byte_fallback) {
                bool all = true;
                for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
                if (all) {
                    for (unsigned char b : s) add(byte_ids_[b], 1);
                    continue;
                }
            }
            if (opt_.unk_token) {
                if (unk_id_ < 0) throw FormatError("BPE unknown token '" + *opt_.unk_token + "' is not in the vocabulary");
                if (unk >= 0 && opt_.fuse_unk) {
                    unk_len += len;
                } else {
                    if (unk >= 0) add(unk, unk_len);
                    unk = unk_id_;
                    unk_len = len;
                }
            }
        }
        if (unk >= 0) add(unk, unk_len);
        merge_all(syms);
        for (auto& s : syms)
            if (s.len) out.push_back(s.id);
    }

private:
    struct Symbol {
        int32_t id;
        int prev, next;
        size_t len;
    };
    struct Cand {
        uint32_t rank;
        size_t pos;
        int32_t new_id;
        bool operator<(const Cand& o) const {  // priority_queue is a max-heap: invert for lowest (rank, pos)
            return rank != o.rank ? rank > o.rank : pos > o.pos;
        }
    };

    const MergeInfo* find(int32_t a, int32_t b) const {
        auto it = merges_.find(pair_key(a, b));
        return it == merges_.end() ? nullptr : &it->second;
    }

    void merge_all(std::vector<Symbol>& syms) const {
        std::priority_queue<Cand> q;
        for (size_t i = 0; i + 1 < syms.size(); ++i)
            if (const MergeInfo* m = find(syms[i].id, syms[i + 1].id)) q.push({m->rank, i, m->new_id});
        while (!q.empty()) {
            Cand top = q.top();
            q.pop();
            Symbol& cur = syms[top.pos];
            if (cur.len == 0 || cur.next == -1) continue;
            size_t next_pos = size_t(cur.next);
            Symbol right = syms[next_pos];
            const MergeInfo* m = find(cur.id, right.id);
            if (!m || m->new_id != top.new_id) continue;  // stale entry
            cur.id = top.new_id;
            cur.len += right.len;
            cur.next = right.next;
            syms[next_pos].len = 0;
            if (right.next > -1 && size_t(right.next) < syms.size()) syms[size_t(right.next)].prev = int(top.pos);
            const Symbol& c = syms[top.pos];
            if (c.prev >= 0)
                if (const MergeInfo* pm = find(syms[size_t(c.prev)].id, c.id)) q.push({pm->rank, size_t(c.prev), pm->new_id});
            if (c.next >= 0 && size_t(c.next) < syms.size())
                if (const MergeInfo* nm = find(c.id, syms[size_t(c.next)].id)) q.push({nm->rank, top.pos, nm->new_id});
        }
    }

    BpeOptions opt_;
    std::unordered_map<uint64_t, MergeInfo> merges_;
    int32_t unk_id_ = -1;
    int32_t byte_ids_[256] = {};
};

}  // namespace

ModelPtr make_bpe(std::unordered_map<std::string, int32_t> vocab,
                  const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions opt) {
    return std::make_shared<Bpe>(std::move(vocab), merges, std::move(opt));
}

ModelPtr make_bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<MergeIds>& merges, BpeOptions opt) {
    return std::make_shared<Bpe>(std::move(vocab), merges, std::move(opt));
}

}  // namespace akunu::text::tok
