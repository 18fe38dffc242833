// One grammar-constrained generation on the core model, step by step as the
// Python package runs it (python/akunu/generation.py): the grammar's mask is
// set before the prefill, the first token is sampled under it, and every
// later token is one masked sampler step after the grammar has accepted the
// token before it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "inference/model.h"
#include "inference/sampling_config.h"
#include "text/grammar/grammar_state.h"

namespace akunu::text {

struct ConstrainedRun {
    int32_t generated = 0;  // tokens produced (each handed to on_token)
    double prefill_ms = 0;  // prefill and the first token's sampling
    double decode_ms = 0;   // the steps after it
};

// Prefills `prompt` at the model's position (cleared first when `fresh`) and
// generates up to max_tokens, each token handed to `on_token` (may be empty;
// returning false stops after that token). Ends after a token of `stop` (not
// fed to the grammar), when the grammar terminates (it accepted one of its own
// stop tokens where it is complete), or at max_tokens. `grammar` is reset
// first. The context ends just before the last token, as the C API's
// streaming does; the model's mask is cleared on the way out.
ConstrainedRun generate_constrained(Model& m, const std::vector<int32_t>& prompt, int32_t max_tokens,
                                    const SamplingConfig& sampling, const std::vector<int32_t>& stop,
                                    GrammarState& grammar, bool fresh,
                                    const std::function<bool(int32_t)>& on_token);

}  // namespace akunu::text
