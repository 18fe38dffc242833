// Thread-local last error, the live-handle registry and the sampling struct
// conversion shared by the C API entry points.
#include "handle.h"

#include <mutex>
#include <unordered_set>

namespace akunu_c {

static thread_local std::string g_last_error;

void set_error(const std::string& msg) { g_last_error = msg; }
void clear_error() { g_last_error.clear(); }

static std::mutex g_handles_mu;
static std::unordered_set<const akunu_model*>& handles() {
    static std::unordered_set<const akunu_model*> s;  // never destroyed before late frees run
    return s;
}

void register_handle(akunu_model* h) {
    std::lock_guard<std::mutex> l(g_handles_mu);
    handles().insert(h);
}

bool unregister_handle(akunu_model* h) {
    std::lock_guard<std::mutex> l(g_handles_mu);
    return handles().erase(h) == 1;
}

akunu_model& live_any(const akunu_model* h, const char* fn) {
    if (!h) throw akunu::Error(std::string(fn) + ": null model handle");
    {
        std::lock_guard<std::mutex> l(g_handles_mu);
        if (!handles().count(h)) throw akunu::Error(std::string(fn) + ": not a live model handle (freed?)");
    }
    return *const_cast<akunu_model*>(h);
}

akunu_model& live(const akunu_model* h, const char* fn) {
    akunu_model& m = live_any(h, fn);
    if (!m.m)
        throw akunu::UnsupportedError(std::string(fn) +
                                      ": this is a Whisper (speech-to-text) model; use akunu_transcribe and its siblings");
    return m;
}

akunu_model& live_whisper(const akunu_model* h, const char* fn) {
    akunu_model& m = live_any(h, fn);
    if (!m.whisper)
        throw akunu::UnsupportedError(std::string(fn) + ": not a Whisper model (architecture '" +
                                      (m.m ? m.m->config().architecture : std::string("?")) + "')");
    return m;
}

akunu::SamplingConfig to_sampling(const AkunuSamplingConfig* sampling, const char* fn) {
    akunu::SamplingConfig cfg;
    if (!sampling) return cfg;
    const AkunuSamplingConfig& s = *sampling;
    if (s.n_logit_bias < 0 || (s.n_logit_bias > 0 && (!s.logit_bias_ids || !s.logit_bias_values)))
        throw akunu::Error(std::string(fn) + ": logit bias arrays missing");
    cfg.temperature = s.temperature;
    cfg.top_k = s.top_k;
    cfg.top_p = s.top_p;
    cfg.min_p = s.min_p;
    cfg.repeat_penalty = s.repeat_penalty;
    cfg.presence_penalty = s.presence_penalty;
    cfg.frequency_penalty = s.frequency_penalty;
    cfg.penalty_window = s.penalty_window;
    cfg.seed = s.seed;
    for (int32_t i = 0; i < s.n_logit_bias; i++) cfg.logit_bias.emplace_back(s.logit_bias_ids[i], s.logit_bias_values[i]);
    return cfg;
}

}  // namespace akunu_c

extern "C" const char* akunu_last_error(void) { return akunu_c::g_last_error.c_str(); }
