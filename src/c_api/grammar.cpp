// The C API's grammar handles (GBNF, JSON Schema, any JSON) and the
// grammar-constrained streaming generation. Grammar handles are registered
// like model handles; each is tied to the model it was compiled for, whose
// vocabulary (and xgrammar compilers, shared by its grammars) it holds.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "akunu/grammar.h"
#include "handle.h"
#include "token_text.h"
#include "text/grammar/compiler.h"
#include "text/grammar/constrained_decode.h"
#include "text/grammar/grammar_spec.h"
#include "text/grammar/grammar_state.h"
#include "text/grammar/stop_tokens.h"

using namespace akunu_c;
using akunu::text::GrammarCompiler;
using akunu::text::GrammarSpec;
using akunu::text::GrammarState;
using akunu::text::Tokenizer;

struct akunu_grammar {
    const akunu_model* model = nullptr;
    // The model's compilers; their tokenizer is also the model's identity (below).
    std::shared_ptr<GrammarCompiler> compiler;
    std::unique_ptr<GrammarState> state;
};

namespace {

std::mutex g_mu;  // guards the two tables below
std::unordered_set<const akunu_grammar*>& grammars() {
    static std::unordered_set<const akunu_grammar*> s;  // never destroyed before late frees run
    return s;
}
// One GrammarCompiler per model handle (Python keeps one per Model).
std::unordered_map<const akunu_model*, std::shared_ptr<GrammarCompiler>>& compilers() {
    static std::unordered_map<const akunu_model*, std::shared_ptr<GrammarCompiler>> m;
    return m;
}

// A model handle is only a pointer, which a later load may reuse after a free.
// Its tokenizer tells the two apart: grammars and compilers hold the one they
// were made with (so its control block outlives the model), and a model loaded
// at the same address has a tokenizer of its own.
bool same_owner(const std::shared_ptr<const Tokenizer>& a, const std::shared_ptr<const Tokenizer>& b) {
    return a && b && !a.owner_before(b) && !b.owner_before(a);
}

bool is_live(const akunu_model* h) {
    try {
        live(h, "");
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

// The model's tokenizer as the handle keeps it (loaded on first use).
std::shared_ptr<const Tokenizer> model_tokenizer(akunu_model& h) {
    const Tokenizer& t = tokenizer_of(h);
    if (!h.tokenizer || h.tokenizer.get() != &t) throw akunu::Error("internal error: the model's tokenizer is not kept");
    return h.tokenizer;
}

// The compilers of model `h`, made on its first grammar. Entries of freed
// models are dropped on the way.
std::shared_ptr<GrammarCompiler> compiler_for(akunu_model& h) {
    std::shared_ptr<const Tokenizer> tok = model_tokenizer(h);
    std::lock_guard<std::mutex> l(g_mu);
    auto& table = compilers();
    for (auto it = table.begin(); it != table.end();) {
        bool stale = !is_live(it->first) || (it->first == &h && !same_owner(it->second->tokenizer(), tok));
        it = stale ? table.erase(it) : std::next(it);
    }
    std::shared_ptr<GrammarCompiler>& c = table[&h];
    if (!c) {
        try {
            c = std::make_shared<GrammarCompiler>(tok, h.m->config().vocab_size,
                                                  akunu::text::end_of_generation_ids(*tok, h.m->file()));
        } catch (...) {
            table.erase(&h);
            throw;
        }
    }
    return c;
}

template <typename MakeSpec>
akunu_status create(akunu_model* model, akunu_grammar** out, const char* fn, MakeSpec make_spec) {
    if (out) *out = nullptr;
    return guarded([&] {
        if (!out) throw akunu::Error(std::string(fn) + ": null out");
        akunu_model& h = live(model, fn);
        if (h.m->is_encoder())
            throw akunu::Error(std::string(fn) + ": this is an embedding model (" + h.m->config().architecture +
                               "): it does not generate");
        GrammarSpec spec = make_spec();  // a bad grammar text fails before the vocabulary is read
        auto g = std::make_unique<akunu_grammar>();
        g->model = &h;
        g->compiler = compiler_for(h);
        g->state = std::make_unique<GrammarState>(g->compiler->compile(spec));
        {
            std::lock_guard<std::mutex> l(g_mu);
            grammars().insert(g.get());
        }
        *out = g.release();
    });
}

// The live grammar `g`, made for model `h` (not for another model, nor for a
// freed one whose address `h` now has); throws naming `fn` otherwise.
akunu_grammar& live_grammar(const akunu_grammar* g, const akunu_model& h, const char* fn) {
    if (!g) throw akunu::Error(std::string(fn) + ": null grammar handle");
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (!grammars().count(g)) throw akunu::Error(std::string(fn) + ": not a live grammar handle (freed?)");
    }
    if (g->model != &h) throw akunu::Error(std::string(fn) + ": the grammar was made for another model");
    if (!same_owner(g->compiler->tokenizer(), h.tokenizer))
        throw akunu::Error(std::string(fn) + ": the grammar was made for a model that has been freed");
    return *const_cast<akunu_grammar*>(g);
}

void generate(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
              const AkunuSamplingConfig* sampling, akunu_grammar* grammar, const int32_t* stop_ids, int32_t n_stop,
              akunu_token_callback callback, void* user_data, AkunuGenerationStats* stats, bool fresh,
              const char* fn) {
    akunu_model& h = live(model, fn);
    akunu_grammar& g = live_grammar(grammar, h, fn);
    if (!prompt || n_prompt <= 0 || max_tokens < 0 || n_stop < 0 || (n_stop > 0 && !stop_ids))
        throw akunu::Error(std::string(fn) + ": bad argument");
    akunu::SamplingConfig cfg = to_sampling(sampling, fn);
    AkunuGenerationStats st{};
    st.prompt_tokens = n_prompt;
    if (stats) *stats = st;
    TokenText text(h, callback != nullptr);  // as akunu_generate_stream hands it out
    std::function<bool(int32_t)> on_token;
    if (callback) on_token = [&](int32_t t) { return callback(t, text.piece(t), user_data); };
    akunu::text::ConstrainedRun run = akunu::text::generate_constrained(
        *h.m, std::vector<int32_t>(prompt, prompt + n_prompt), max_tokens, cfg,
        std::vector<int32_t>(stop_ids, stop_ids + n_stop), *g.state, fresh, on_token);
    if (max_tokens == 0) return;
    // As akunu_generate_stream: the first token comes from the prefill, decode made the rest.
    st.generated_tokens = run.generated;
    st.prefill_time_ms = (float)run.prefill_ms;
    st.decode_time_ms = (float)run.decode_ms;
    st.prefill_tokens_per_sec = st.prefill_time_ms > 0 ? n_prompt * 1000.0f / st.prefill_time_ms : 0.0f;
    st.decode_tokens_per_sec = st.decode_time_ms > 0 && run.generated > 1
                                   ? (run.generated - 1) * 1000.0f / st.decode_time_ms
                                   : 0.0f;
    if (stats) *stats = st;
}

}  // namespace

extern "C" {

akunu_status akunu_grammar_create(akunu_model* model, const char* gbnf, akunu_grammar** out) {
    return create(model, out, "akunu_grammar_create", [&] {
        if (!gbnf) throw akunu::Error("akunu_grammar_create: null grammar text");
        return GrammarSpec::gbnf(gbnf);
    });
}

akunu_status akunu_grammar_create_from_schema(akunu_model* model, const char* schema_json, akunu_grammar** out) {
    return create(model, out, "akunu_grammar_create_from_schema", [&] {
        if (!schema_json) throw akunu::Error("akunu_grammar_create_from_schema: null schema");
        return GrammarSpec::json_schema(schema_json);
    });
}

akunu_status akunu_grammar_create_json(akunu_model* model, akunu_grammar** out) {
    return create(model, out, "akunu_grammar_create_json", [] { return GrammarSpec::any_json(); });
}

void akunu_grammar_free(akunu_grammar* grammar) {
    // Unknown pointers (double free, foreign) are left alone: freeing never aborts.
    if (!grammar) return;
    {
        std::lock_guard<std::mutex> l(g_mu);
        if (grammars().erase(grammar) != 1) return;
    }
    delete grammar;
}

akunu_status akunu_generate_grammar(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
                                    const AkunuSamplingConfig* sampling, akunu_grammar* grammar,
                                    const int32_t* stop_ids, int32_t n_stop, akunu_token_callback callback,
                                    void* user_data, AkunuGenerationStats* stats) {
    return guarded([&] {
        generate(model, prompt, n_prompt, max_tokens, sampling, grammar, stop_ids, n_stop, callback, user_data, stats,
                 /*fresh=*/true, "akunu_generate_grammar");
    });
}

akunu_status akunu_generate_grammar_continue(akunu_model* model, const int32_t* new_tokens, int32_t n_new,
                                             int32_t max_tokens, const AkunuSamplingConfig* sampling,
                                             akunu_grammar* grammar, const int32_t* stop_ids, int32_t n_stop,
                                             akunu_token_callback callback, void* user_data,
                                             AkunuGenerationStats* stats) {
    return guarded([&] {
        generate(model, new_tokens, n_new, max_tokens, sampling, grammar, stop_ids, n_stop, callback, user_data,
                 stats, /*fresh=*/false, "akunu_generate_grammar_continue");
    });
}

}  // extern "C"
