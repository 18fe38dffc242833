#include "text/grammar/constrained_decode.h"

#include <algorithm>
#include <chrono>

namespace akunu::text {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The model's sampler mask is on for this generation only: other generations
// on the model (and the device chain's length) see no mask afterwards.
struct MaskScope {
    Model& m;
    ~MaskScope() {
        try {
            m.set_mask({});
        } catch (...) {
        }
    }
};

}  // namespace

ConstrainedRun generate_constrained(Model& m, const std::vector<int32_t>& prompt, int32_t max_tokens,
                                    const SamplingConfig& sampling, const std::vector<int32_t>& stop,
                                    GrammarState& grammar, bool fresh,
                                    const std::function<bool(int32_t)>& on_token) {
    ConstrainedRun run;
    m.set_sampling(sampling);  // validates before any work
    grammar.reset();
    if (fresh) m.truncate(0);
    if (max_tokens <= 0) return run;
    auto is_stop = [&](int32_t t) { return std::find(stop.begin(), stop.end(), t) != stop.end(); };

    MaskScope scope{m};
    m.set_mask(grammar.mask_words());  // the first token's mask, before the prefill (as Python)
    auto t0 = std::chrono::steady_clock::now();
    m.prefill(prompt);
    int32_t next = m.sample_next();  // the sampler applies the mask (greedy: masked argmax)
    run.prefill_ms = ms_since(t0);
    auto t1 = std::chrono::steady_clock::now();

    // `next` has been produced but not fed; the context ends just before it.
    while (true) {
        run.generated++;
        const bool stopping = is_stop(next);
        if (!stopping) grammar.accept(next);
        if (on_token && !on_token(next)) break;
        if (stopping || grammar.terminated() || run.generated >= max_tokens) break;
        m.set_mask(grammar.mask_words());
        std::vector<int32_t> ids = m.decode_sampled(next, 1, stop);
        if (ids.empty()) break;
        next = ids[0];
    }
    run.decode_ms = ms_since(t1);
    return run;
}

}  // namespace akunu::text
