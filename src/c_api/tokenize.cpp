// The C API's text entry points: the model's tokenizer (built from its file
// on first use, src/text/tokenizer) behind encode / decode, and text
// embeddings through the same core call as akunu_embed.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "handle.h"
#include "text/tokenizer/unicode.h"

using namespace akunu_c;

namespace akunu_c {

// Calls on one handle do not overlap (the C API's rule), so the lazy load needs no lock.
const akunu::text::Tokenizer& tokenizer_of(akunu_model& h) {
    if (!h.tokenizer) h.tokenizer = akunu::text::load_tokenizer(h.m->file(), h.path);
    return *h.tokenizer;
}

}  // namespace akunu_c

namespace {

std::string text_arg(const char* text, const char* fn) {
    if (!text) throw akunu::Error(std::string(fn) + ": null text");
    std::string s(text);
    if (!akunu::text::unicode::valid_utf8(s)) throw akunu::Error(std::string(fn) + ": text is not valid UTF-8");
    return s;
}

int32_t count_of(size_t n, const char* fn) {
    if (n > size_t(std::numeric_limits<int32_t>::max())) throw akunu::Error(std::string(fn) + ": result too large");
    return int32_t(n);
}

void check_id(const akunu::text::Tokenizer& t, int32_t id, const char* fn) {
    if (id < 0 || id >= t.vocab_size())
        throw akunu::Error(std::string(fn) + ": token id " + std::to_string(id) + " is outside the vocabulary (size " +
                           std::to_string(t.vocab_size()) + ")");
}

}  // namespace

extern "C" {

akunu_status akunu_encode(akunu_model* model, const char* text, bool add_special, int32_t* out_tokens,
                          int32_t max_tokens, int32_t* n_tokens) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_encode");
        if (!n_tokens) throw akunu::Error("akunu_encode: null n_tokens");
        if (max_tokens < 0 || (max_tokens > 0 && !out_tokens)) throw akunu::Error("akunu_encode: bad output buffer");
        std::string s = text_arg(text, "akunu_encode");
        std::vector<int32_t> ids = tokenizer_of(h).encode(s, add_special);
        int32_t n = count_of(ids.size(), "akunu_encode");
        *n_tokens = n;
        if (n > max_tokens)
            throw akunu::Error("akunu_encode: the text is " + std::to_string(n) + " tokens, the buffer holds " +
                               std::to_string(max_tokens));
        if (n) std::memcpy(out_tokens, ids.data(), ids.size() * sizeof(int32_t));
    });
}

akunu_status akunu_token_count(akunu_model* model, const char* text, bool add_special, int32_t* n_tokens) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_token_count");
        if (!n_tokens) throw akunu::Error("akunu_token_count: null n_tokens");
        std::string s = text_arg(text, "akunu_token_count");
        *n_tokens = count_of(tokenizer_of(h).encode(s, add_special).size(), "akunu_token_count");
    });
}

akunu_status akunu_decode_token(akunu_model* model, int32_t token_id, const char** text, int32_t* n_bytes) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_decode_token");
        if (!text || !n_bytes) throw akunu::Error("akunu_decode_token: null argument");
        const akunu::text::Tokenizer& t = tokenizer_of(h);
        check_id(t, token_id, "akunu_decode_token");
        // a view into the tokenizer's own table: std::string storage ends with a NUL
        std::string_view b = t.token_bytes_view(token_id);
        static const char empty[1] = {0};
        *text = b.empty() ? empty : b.data();
        *n_bytes = int32_t(b.size());
    });
}

akunu_status akunu_decode(akunu_model* model, const int32_t* ids, int32_t n_ids, bool skip_special, char* out,
                          int32_t out_size, int32_t* n_bytes) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_decode");
        if (!n_bytes) throw akunu::Error("akunu_decode: null n_bytes");
        if (n_ids < 0 || (n_ids > 0 && !ids)) throw akunu::Error("akunu_decode: bad ids");
        if (out_size < 0 || (out_size > 0 && !out)) throw akunu::Error("akunu_decode: bad output buffer");
        const akunu::text::Tokenizer& t = tokenizer_of(h);
        std::vector<int32_t> v(ids, ids + n_ids);
        for (int32_t id : v) check_id(t, id, "akunu_decode");
        std::string s = t.decode(v, skip_special);
        int32_t n = count_of(s.size(), "akunu_decode");
        *n_bytes = n;
        if (int64_t(n) + 1 > int64_t(out_size))
            throw akunu::Error("akunu_decode: the text is " + std::to_string(n) + " bytes, the buffer needs " +
                               std::to_string(int64_t(n) + 1) + " (with the NUL) and holds " + std::to_string(out_size));
        std::memcpy(out, s.data(), s.size());
        out[s.size()] = '\0';
    });
}

akunu_status akunu_embed_text(akunu_model* model, const char* text, bool truncate, float* out, int32_t max_dims) {
    return guarded([&] {
        akunu_model& h = live(model, "akunu_embed_text");
        if (!out) throw akunu::Error("akunu_embed_text: null output");
        akunu::Model& m = *h.m;
        if (!m.is_encoder())
            throw akunu::Error("akunu_embed_text: this is a generative model (" + m.config().architecture +
                               "): embeddings need an embedding model such as BERT");
        if (max_dims < m.embedding_dim())
            throw akunu::Error("akunu_embed_text: the embedding has " + std::to_string(m.embedding_dim()) +
                               " floats, max_dims is " + std::to_string(max_dims));
        std::string s = text_arg(text, "akunu_embed_text");
        // Model.embed: [CLS] ... [SEP], at most max_seq_length tokens (the closing [SEP] kept)
        std::vector<int32_t> ids = tokenizer_of(h).encode(s, true);
        int64_t n_ctx = m.n_ctx();
        int64_t max_len = m.file().get_int("akunu.max_seq_length", 0);
        if (max_len <= 0 || max_len > n_ctx) max_len = n_ctx;
        if (int64_t(ids.size()) > max_len) {
            if (!truncate)
                throw akunu::Error("akunu_embed_text: text of " + std::to_string(ids.size()) +
                                   " tokens exceeds the model's " + std::to_string(max_len) + "-token limit");
            int32_t last = ids.back();
            ids.resize(size_t(max_len - 1));
            ids.push_back(last);
        }
        std::vector<float> e = m.embed({ids});
        std::memcpy(out, e.data(), e.size() * sizeof(float));
    });
}

}  // extern "C"
