// Draft tokens from n-gram statistics of the context (book: "Speculative
// Decoding with N-grams"): no draft model; the target model verifies a draft
// in one batched pass and keeps the longest correct prefix. The same
// predictor as the Python package's akunu/speculative.py (same drafts for the
// same context), for the C API's akunu_set_speculation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace akunu {

class NgramPredictor {
public:
    static constexpr int kMaxOrder = 4;      // up to 4-grams: contexts of 1 to 3 tokens
    static constexpr size_t kMaxHistory = 512;  // tokens of context whose n-grams are counted

    explicit NgramPredictor(int draft_count = 4) : draft_count_(draft_count) {}

    void update(int32_t token);
    void update_all(const std::vector<int32_t>& tokens) {
        for (int32_t t : tokens) update(t);
    }
    // Up to draft_count tokens, each the most frequent successor (ties to the
    // smallest id) of the longest context seen before.
    std::vector<int32_t> predict() const;

private:
    using Context = std::vector<int32_t>;
    using Counts = std::map<int32_t, int>;
    void forget(int32_t oldest);

    int draft_count_;
    std::deque<int32_t> history_;
    std::map<Context, Counts> tables_[kMaxOrder - 1];  // per context length
};

}  // namespace akunu
