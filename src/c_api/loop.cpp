// The C API's low-level decode loop (prefill, single steps, chains) and the
// streaming generation with a per-token callback and timing statistics.
#include <algorithm>
#include <chrono>
#include <string>

#include "handle.h"
#include "token_text.h"
#include "inference/ngram_predictor.h"

using namespace akunu_c;

namespace {

const std::vector<int32_t> kNoStop;

// Rewinds the cached context to `position` (which must not lie beyond it) so
// the next token is written there; the position names the token's slot.
void seek(akunu::Model& m, int32_t position, const char* fn) {
    if (position < 0 || position > m.n_past())
        throw akunu::Error(std::string(fn) + ": position " + std::to_string(position) + " is outside the cached 0.." +
                           std::to_string(m.n_past()));
    if (position < m.n_past()) m.truncate(position);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Decode steps per call into the core when streaming: the device's chains are
// kept, and a callback stop rewinds the tokens decoded past it.
constexpr int kStreamChunk = 16;

// Feeds `last` plus an n-gram draft in one batched pass and keeps the longest
// prefix of the draft that greedy decoding gives (Model::verify's argmax after
// each token), then the model's own next token: the tokens of greedy
// decoding, several per pass where the context repeats itself. The chain
// stops after a stop id; the context never holds rejected draft tokens.
template <typename IsStop>
std::vector<int32_t> speculative_step(akunu::Model& m, const akunu::NgramPredictor& predictor, int32_t last,
                                      int remaining, const IsStop& is_stop, akunu_model& h) {
    const int room = m.n_ctx() - m.n_past();
    std::vector<int32_t> draft = predictor.predict();
    const int keep = std::max(std::min(remaining, room) - 1, 0);
    if ((int)draft.size() > keep) draft.resize((size_t)keep);
    if (draft.empty()) return m.decode_greedy(last, 1, kNoStop);
    const int base = m.n_past();
    std::vector<int32_t> feed{last};
    feed.insert(feed.end(), draft.begin(), draft.end());
    const std::vector<int32_t> verified = m.verify(feed);
    size_t accepted = 0;
    while (accepted < draft.size() && verified[accepted] == draft[accepted]) accepted++;
    h.drafted += (int32_t)draft.size();
    h.accepted += (int32_t)accepted;
    m.truncate(base + 1 + (int)accepted);  // drop the KV of rejected draft tokens
    std::vector<int32_t> out(draft.begin(), draft.begin() + (long)accepted);
    out.push_back(verified[accepted]);
    for (size_t i = 0; i < out.size(); i++)
        if (is_stop(out[i])) {
            m.truncate(base + 1 + (int)i);
            out.resize(i + 1);
            break;
        }
    return out;
}

// Prefill `prompt` at the current position (at 0 when `fresh`), then decode until max_tokens, a
// stop id (emitted) or the callback returning false (that token is the last).
void stream(akunu_model& h, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
            const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop, akunu_token_callback callback,
            void* user_data, AkunuGenerationStats* stats, bool fresh, const char* fn) {
    if (!prompt || n_prompt <= 0 || max_tokens < 0 || n_stop < 0 || (n_stop > 0 && !stop_ids))
        throw akunu::Error(std::string(fn) + ": bad argument");
    akunu::Model& m = *h.m;
    akunu::SamplingConfig cfg = to_sampling(sampling, fn);
    m.set_sampling(cfg);  // validates before any work
    if (fresh) m.truncate(0);
    AkunuGenerationStats st{};
    st.prompt_tokens = n_prompt;
    if (stats) *stats = st;
    if (max_tokens == 0) return;
    const bool greedy = cfg.temperature == 0.0f && cfg.logit_bias.empty() && !cfg.penalizes();
    const std::vector<int32_t> stop(stop_ids, stop_ids + n_stop);
    auto is_stop = [&](int32_t t) { return std::find(stop.begin(), stop.end(), t) != stop.end(); };

    auto t0 = std::chrono::steady_clock::now();
    int32_t next = m.prefill(std::vector<int32_t>(prompt, prompt + n_prompt));
    if (!greedy) next = m.sample_next();
    st.prefill_time_ms = (float)ms_since(t0);
    auto t1 = std::chrono::steady_clock::now();

    // `next` has been produced but not fed; the context ends just before it.
    TokenText text(h, callback != nullptr);
    int32_t produced = 1;
    bool go = !callback || callback(next, text.piece(next), user_data);
    std::unique_ptr<akunu::NgramPredictor> predictor;
    h.drafted = h.accepted = 0;
    if (greedy && h.speculation) {
        predictor = std::make_unique<akunu::NgramPredictor>();
        predictor->update_all(std::vector<int32_t>(prompt, prompt + n_prompt));
        predictor->update(next);
    }
    while (go && !is_stop(next) && produced < max_tokens) {
        const int base = m.n_past();  // `next` goes here
        const int want = std::min(kStreamChunk, max_tokens - produced);
        std::vector<int32_t> ids = predictor ? speculative_step(m, *predictor, next, max_tokens - produced, is_stop, h)
                                   : greedy  ? m.decode_greedy(next, want, stop)
                                             : m.decode_sampled(next, want, stop);
        if (ids.empty()) break;
        for (size_t i = 0; i < ids.size(); i++) {
            next = ids[i];
            produced++;
            if (predictor) predictor->update(next);
            if (callback && !callback(next, text.piece(next), user_data)) {
                go = false;
                // Keep the context of the tokens up to the one the callback took.
                if ((int)(base + i + 1) < m.n_past()) m.truncate(base + (int)i + 1);
                break;
            }
        }
    }
    st.generated_tokens = produced;
    st.decode_time_ms = (float)ms_since(t1);
    st.prefill_tokens_per_sec = st.prefill_time_ms > 0 ? n_prompt * 1000.0f / st.prefill_time_ms : 0.0f;
    // The first token comes from the prefill; the decode phase made the rest.
    st.decode_tokens_per_sec = st.decode_time_ms > 0 && produced > 1 ? (produced - 1) * 1000.0f / st.decode_time_ms
                                                                      : 0.0f;
    if (stats) *stats = st;
}

}  // namespace

extern "C" {

akunu_status akunu_prefill(akunu_model* model, const int32_t* tokens, int32_t n_tokens, int32_t* out_token) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_prefill");
        if (!tokens || n_tokens <= 0 || !out_token) throw akunu::Error("akunu_prefill: bad argument");
        *out_token = h.m->prefill(std::vector<int32_t>(tokens, tokens + n_tokens));
    });
}

akunu_status akunu_decode_step(akunu_model* model, int32_t token, int32_t position, int32_t* out_token) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_decode_step");
        if (!out_token) throw akunu::Error("akunu_decode_step: null out_token");
        seek(*h.m, position, "akunu_decode_step");
        std::vector<int32_t> ids = h.m->decode_greedy(token, 1, kNoStop);
        if (ids.size() != 1) throw akunu::Error("akunu_decode_step: no token decoded");
        *out_token = ids[0];
    });
}

akunu_status akunu_chain_decode(akunu_model* model, int32_t first_token, int32_t start_position, int32_t count,
                                int32_t* out_tokens, int32_t* n_out) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_chain_decode");
        if (count < 0 || (count > 0 && !out_tokens) || !n_out) throw akunu::Error("akunu_chain_decode: bad argument");
        *n_out = 0;
        seek(*h.m, start_position, "akunu_chain_decode");
        if (count == 0) return;
        std::vector<int32_t> ids = h.m->decode_greedy(first_token, count, kNoStop);
        std::copy(ids.begin(), ids.end(), out_tokens);
        *n_out = (int32_t)ids.size();
    });
}

int32_t akunu_get_position(const akunu_model* model) {
    try {
        int32_t p = live(model, "akunu_get_position").m->n_past();
        clear_error();
        return p;
    } catch (const std::exception& e) {
        set_error(e.what());
        return -1;
    }
}

akunu_status akunu_generate_stream(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
                                   const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop,
                                   akunu_token_callback callback, void* user_data, AkunuGenerationStats* stats) {
    return guarded([&] {
        stream(live(model, "akunu_generate_stream"), prompt, n_prompt, max_tokens, sampling, stop_ids, n_stop, callback,
               user_data, stats, /*fresh=*/true, "akunu_generate_stream");
    });
}

akunu_status akunu_generate_continue(akunu_model* model, const int32_t* new_tokens, int32_t n_new, int32_t max_tokens,
                                     const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop,
                                     akunu_token_callback callback, void* user_data, AkunuGenerationStats* stats) {
    return guarded([&] {
        stream(live(model, "akunu_generate_continue"), new_tokens, n_new, max_tokens, sampling, stop_ids, n_stop,
               callback, user_data, stats, /*fresh=*/false, "akunu_generate_continue");
    });
}

akunu_status akunu_speculation_stats(const akunu_model* model, int32_t* drafted, int32_t* accepted) {
    return guarded([&] {
        const akunu_model& h = live(model, "akunu_speculation_stats");
        if (!drafted || !accepted) throw akunu::Error("akunu_speculation_stats: null argument");
        *drafted = h.drafted;
        *accepted = h.accepted;
    });
}

void akunu_set_speculation(akunu_model* model, bool enabled) {
    try {
        live(model, "akunu_set_speculation").speculation = enabled;
        clear_error();
    } catch (const std::exception& e) {
        set_error(e.what());
    }
}

}  // extern "C"
