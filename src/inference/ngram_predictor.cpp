#include "inference/ngram_predictor.h"

#include <algorithm>

namespace akunu {

void NgramPredictor::update(int32_t token) {
    for (int n = 1; n < kMaxOrder; n++) {
        if ((int)history_.size() < n) break;
        Context ctx(history_.end() - n, history_.end());
        tables_[n - 1][ctx][token]++;
    }
    history_.push_back(token);
    if (history_.size() > kMaxHistory) {
        const int32_t oldest = history_.front();
        history_.pop_front();
        forget(oldest);
    }
}

// The n-grams that started at the dropped token leave the window.
void NgramPredictor::forget(int32_t oldest) {
    std::vector<int32_t> seq{oldest};
    for (size_t i = 0; i < std::min(history_.size(), (size_t)kMaxOrder - 1); i++) seq.push_back(history_[i]);
    for (int n = 1; n < kMaxOrder; n++) {
        if ((int)seq.size() <= n) break;
        Context ctx(seq.begin(), seq.begin() + n);
        auto& table = tables_[n - 1];
        auto c = table.find(ctx);
        if (c == table.end()) continue;
        auto e = c->second.find(seq[(size_t)n]);
        if (e != c->second.end() && --e->second <= 0) c->second.erase(e);
        if (c->second.empty()) table.erase(c);
    }
}

std::vector<int32_t> NgramPredictor::predict() const {
    const size_t keep = std::min(history_.size(), (size_t)kMaxOrder - 1);
    Context ctx(history_.end() - (long)keep, history_.end());
    std::vector<int32_t> draft;
    for (int d = 0; d < draft_count_; d++) {
        bool found = false;
        int32_t next = 0;
        for (int n = (int)std::min(ctx.size(), (size_t)kMaxOrder - 1); n > 0; n--) {
            auto c = tables_[n - 1].find(Context(ctx.end() - n, ctx.end()));
            if (c == tables_[n - 1].end() || c->second.empty()) continue;
            int best = -1;
            for (const auto& [tok, count] : c->second)  // ascending ids: the first of the highest count wins
                if (count > best) {
                    best = count;
                    next = tok;
                }
            found = true;
            break;
        }
        if (!found) break;
        draft.push_back(next);
        ctx.push_back(next);
    }
    return draft;
}

}  // namespace akunu
