// The C API's batched generation: many independent requests through the
// continuous-batching engine (akunu::BatchEngine), every weight read once a
// step for all of them, as the Python package's Model.generate_batch runs
// them. Scheduling: decode rows first, then prompt chunks in arrival order
// within the pass's row budget; requests beyond the engine's sequence slots
// wait for a slot.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "handle.h"
#include "inference/batch_engine.h"

using namespace akunu_c;

namespace {

constexpr int kMaxSequences = 16;  // as Model.generate_batch: parallel = min(requests, 16)

struct Request {
    int index = 0;
    int seq = -1;
    std::vector<int32_t> feed;  // tokens to feed next (prompt rest, or the last drawn token)
    int prompt_left = 0;        // of `feed`, prompt tokens still to prefill
    int made = 0;
};

akunu::BatchEngine& engine_of(akunu_model& h, int n_requests) {
    if (!h.batch) {
        akunu::BatchOptions opt;
        opt.max_seqs = std::min(std::max(n_requests, 2), kMaxSequences);
        h.batch = &h.m->enable_batching(opt);
    }
    return *h.batch;
}

}  // namespace

extern "C" {

akunu_status akunu_generate_batch(akunu_model* model, const int32_t* const* prompts, const int32_t* n_prompts,
                                  int32_t n_requests, int32_t max_tokens, const AkunuSamplingConfig* sampling,
                                  const int32_t* stop_ids, int32_t n_stop, int32_t* out, int32_t* n_out) {
    return guarded([&] {
        const char* fn = "akunu_generate_batch";
        akunu_model& h = live(model, fn);
        if (n_requests < 0 || max_tokens < 0 || n_stop < 0 || (n_stop > 0 && !stop_ids) ||
            (n_requests > 0 && (!prompts || !n_prompts || !n_out || (max_tokens > 0 && !out))))
            throw akunu::Error(std::string(fn) + ": bad argument");
        akunu::Model& m = *h.m;
        const akunu::SamplingConfig cfg = to_sampling(sampling, fn);
        m.set_sampling(cfg);  // validates before any work
        const int vocab = m.config().vocab_size, n_ctx = m.n_ctx();
        for (int32_t i = 0; i < n_requests; i++) {
            if (!prompts[i] || n_prompts[i] <= 0)
                throw akunu::Error(std::string(fn) + ": request " + std::to_string(i) + " has no prompt");
            if ((int64_t)n_prompts[i] + max_tokens > n_ctx)
                throw akunu::Error(std::string(fn) + ": request " + std::to_string(i) + " needs " +
                                   std::to_string((int64_t)n_prompts[i] + max_tokens) +
                                   " tokens of context; n_ctx is " + std::to_string(n_ctx));
            for (int32_t k = 0; k < n_prompts[i]; k++)
                if (prompts[i][k] < 0 || prompts[i][k] >= vocab)
                    throw akunu::Error(std::string(fn) + ": token id " + std::to_string(prompts[i][k]) +
                                       " is outside the vocabulary (size " + std::to_string(vocab) + ")");
            n_out[i] = 0;
        }
        if (n_requests == 0 || max_tokens == 0) return;
        akunu::BatchEngine& e = engine_of(h, n_requests);
        const std::vector<int32_t> stop(stop_ids, stop_ids + n_stop);
        auto is_stop = [&](int32_t t) { return std::find(stop.begin(), stop.end(), t) != stop.end(); };

        std::deque<Request> waiting;
        for (int32_t i = 0; i < n_requests; i++) {
            Request r;
            r.index = i;
            waiting.push_back(std::move(r));
        }
        std::vector<Request> running;
        // Sequences are closed on every exit, errors included.
        struct Closer {
            akunu::BatchEngine& e;
            std::vector<Request>& running;
            ~Closer() {
                for (Request& r : running)
                    if (r.seq >= 0) e.close(r.seq);
            }
        } closer{e, running};

        while (!waiting.empty() || !running.empty()) {
            while (!waiting.empty() && (int)running.size() < e.max_seqs()) {
                Request r = std::move(waiting.front());
                const std::vector<int32_t> prompt(prompts[r.index], prompts[r.index] + n_prompts[r.index]);
                int cached = 0;
                r.seq = e.open(prompt, &cached);
                if (r.seq < 0) break;  // no slot free: held by another user of the engine
                waiting.pop_front();
                e.set_sampling(r.seq, cfg);
                r.feed.assign(prompt.begin() + cached, prompt.end());
                r.prompt_left = (int)r.feed.size();
                running.push_back(std::move(r));
            }
            if (running.empty()) throw akunu::Error(std::string(fn) + ": the batch engine has no free sequence");
            // This pass: every decoding request's token, then prompt chunks.
            std::vector<akunu::BatchEntry> entries;
            std::vector<int> who;  // running index of each entry
            int room = e.max_pass_tokens();
            for (size_t k = 0; k < running.size() && room > 0; k++)
                if (running[k].prompt_left == 0) {
                    entries.push_back(akunu::BatchEntry{running[k].seq, running[k].feed, true, true});
                    who.push_back((int)k);
                    room -= (int)running[k].feed.size();
                }
            for (size_t k = 0; k < running.size() && room > 0; k++)
                if (running[k].prompt_left > 0) {
                    Request& r = running[k];
                    const int n = std::min(room, r.prompt_left);
                    akunu::BatchEntry be{r.seq, std::vector<int32_t>(r.feed.begin(), r.feed.begin() + n),
                                         n == (int)r.feed.size(), false};
                    entries.push_back(std::move(be));
                    who.push_back((int)k);
                    room -= n;
                }
            const std::vector<int32_t> drawn = e.step(entries);
            size_t d = 0;
            std::vector<bool> done(running.size(), false);
            for (size_t x = 0; x < entries.size(); x++) {
                Request& r = running[(size_t)who[x]];
                const size_t fed = entries[x].tokens.size();
                r.feed.erase(r.feed.begin(), r.feed.begin() + (long)fed);
                if (!entries[x].generated) r.prompt_left -= (int)fed;
                if (!entries[x].sample) continue;
                const int32_t tok = drawn[d++];
                out[(size_t)r.index * (size_t)max_tokens + (size_t)r.made] = tok;
                n_out[r.index] = ++r.made;
                if (is_stop(tok) || r.made >= max_tokens) done[(size_t)who[x]] = true;
                else r.feed = {tok};
            }
            std::vector<Request> still;
            for (size_t k = 0; k < running.size(); k++) {
                if (done[k]) e.close(running[k].seq);
                else still.push_back(std::move(running[k]));
            }
            running.swap(still);
        }
    });
}

}  // extern "C"
