// The C API's model lifecycle, logits, array generation and embeddings: every
// entry point catches C++ exceptions and turns them into a status code plus a
// thread-local message.
#include <algorithm>
#include <cstring>
#include <string>

#include "handle.h"

using namespace akunu_c;

extern "C" {

akunu_status akunu_load_model(const char* path, const AkunuLoadParams* params, akunu_model** out) {
    return guarded([&] {
        if (!path || !out) throw akunu::Error("akunu_load_model: null argument");
        akunu::LoadOptions opt;
        if (params) {
            opt.device = params->device ? params->device : "auto";
            opt.n_ctx = params->n_ctx;
            opt.n_threads = params->n_threads;
        }
        auto h = std::make_unique<akunu_model>();
        if (is_whisper_model(path)) h->whisper = load_whisper(path, opt);  // speech to text (whisper.h)
        else h->m = std::make_unique<akunu::Model>(path, opt);
        h->path = path;
        register_handle(h.get());
        *out = h.release();
    });
}

void akunu_free_model(akunu_model* model) {
    // Unknown pointers (double free, foreign) are left alone: freeing never aborts.
    if (model && unregister_handle(model)) delete model;
}

akunu_status akunu_get_config(const akunu_model* model, AkunuModelConfig* out) {
    return guarded([&] {
        akunu_model& h = live_any(model, "akunu_get_config");
        if (!out) throw akunu::Error("akunu_get_config: null argument");
        if (h.whisper) {
            *out = whisper_config(*h.whisper);
            return;
        }
        const akunu::ModelConfig& c = h.m->config();
        *out = AkunuModelConfig{c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim,
                                c.vocab_size, c.context_length, h.m->n_ctx(), c.norm_eps, c.rope_base, {}};
        std::strncpy(out->architecture, c.architecture.c_str(), sizeof(out->architecture) - 1);
    });
}

akunu_status akunu_logits(akunu_model* model, const int32_t* tokens, int32_t n, float* out) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_logits");
        if (!tokens || !out || n <= 0) throw akunu::Error("akunu_logits: bad argument");
        std::vector<float> l = h.m->logits(std::vector<int32_t>(tokens, tokens + n));
        std::memcpy(out, l.data(), l.size() * sizeof(float));
    });
}

AkunuSamplingConfig akunu_default_sampling(void) {
    AkunuSamplingConfig c{};
    c.top_p = 1.0f;
    c.repeat_penalty = 1.0f;
    c.penalty_window = 64;
    return c;
}

akunu_status akunu_generate(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
                            const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop,
                            int32_t* out, int32_t* n_out) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_generate");
        if (!prompt || n_prompt <= 0 || !out || !n_out || max_tokens < 0 || n_stop < 0)
            throw akunu::Error("akunu_generate: bad argument");
        akunu::SamplingConfig cfg = to_sampling(sampling, "akunu_generate");
        akunu::Model& m = *h.m;
        m.set_sampling(cfg);  // validates before any work
        *n_out = 0;
        if (max_tokens == 0) return;
        const bool greedy = cfg.temperature == 0.0f && cfg.logit_bias.empty() && !cfg.penalizes();
        if (greedy && h.speculation) {  // the streaming loop verifies the drafts
            struct Sink {
                int32_t* out;
                int32_t n;
            } sink{out, 0};
            auto collect = [](int32_t id, const char*, void* user) {
                Sink* s = static_cast<Sink*>(user);
                s->out[s->n++] = id;
                return true;
            };
            if (akunu_generate_continue(model, prompt, n_prompt, max_tokens, sampling, stop_ids, n_stop, collect, &sink,
                                        nullptr) != AKUNU_OK)
                throw akunu::Error(akunu_last_error());
            *n_out = sink.n;
            return;
        }
        int32_t next = m.prefill(std::vector<int32_t>(prompt, prompt + n_prompt));
        if (!greedy) next = m.sample_next();
        std::vector<int32_t> stop(stop_ids, stop_ids + (stop_ids ? n_stop : 0));
        out[0] = next;
        int32_t n = 1;
        if (std::find(stop.begin(), stop.end(), next) == stop.end() && max_tokens > 1) {
            std::vector<int32_t> rest = greedy ? m.decode_greedy(next, max_tokens - 1, stop)
                                               : m.decode_sampled(next, max_tokens - 1, stop);
            for (int32_t t : rest) out[n++] = t;
        }
        *n_out = n;
    });
}

akunu_status akunu_generate_greedy(akunu_model* model, const int32_t* prompt, int32_t n_prompt,
                                   int32_t max_tokens, const int32_t* stop_ids, int32_t n_stop,
                                   int32_t* out, int32_t* n_out) {
    return akunu_generate(model, prompt, n_prompt, max_tokens, nullptr, stop_ids, n_stop, out, n_out);
}

int32_t akunu_embedding_dim(const akunu_model* model) {
    try {
        akunu_model& h = live(model, "akunu_embedding_dim");
        return h.m->is_encoder() ? h.m->embedding_dim() : 0;
    } catch (const std::exception& e) {
        set_error(e.what());
        return 0;
    }
}

akunu_status akunu_embed(akunu_model* model, const int32_t* const* seqs, const int32_t* lens, int32_t n_seqs,
                         float* out) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_embed");
        if (n_seqs < 0 || (n_seqs > 0 && (!seqs || !lens || !out))) throw akunu::Error("akunu_embed: bad argument");
        std::vector<std::vector<int32_t>> batch;
        for (int32_t i = 0; i < n_seqs; i++) {
            if (lens[i] < 0 || (lens[i] > 0 && !seqs[i])) throw akunu::Error("akunu_embed: bad sequence");
            batch.emplace_back(seqs[i], seqs[i] + lens[i]);
        }
        std::vector<float> e = h.m->embed(batch);
        std::memcpy(out, e.data(), e.size() * sizeof(float));
    });
}

void akunu_reset(akunu_model* model) {
    guarded([&] { live(model, "akunu_reset").m->truncate(0); });
}

}  // extern "C"
