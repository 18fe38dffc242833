// Encoder models (BERT): load-time setup and sentence embeddings. Sequences
// are packed into passes of the encoder table (each attends only to itself);
// the hidden states are pooled on the host and L2-normalized when the model
// says so (sentence-transformers' Normalize module).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/table_builder.h"
#include "inference/model.h"

namespace akunu {

namespace {
constexpr int kDefaultEncoderContext = 512;
// Tokens per encoder pass: sequences are packed together (each attends only
// to itself), so a batch of short sentences costs a few large GEMMs instead
// of many small ones.
constexpr int kEncoderBatchTokens = 2048;
}  // namespace

void Model::load_encoder(const LoadOptions& opt) {
    // An encoder has no use for more context than its learned positions: a
    // larger request (one -c for several models in a server) is capped there.
    encoder_max_seq_ = std::min(opt.n_ctx > 0 ? opt.n_ctx : kDefaultEncoderContext, cfg_.context_length);
    const int batch = std::max(encoder_max_seq_, kEncoderBatchTokens);
    check_memory(batch, std::vector<int>((size_t)cfg_.n_layers, batch));
    kv_.allocate(*device_, cfg_.n_layers, batch, cfg_.kv_dim());
    scratch_.allocate(*device_, cfg_, batch, 1, 1);
    encoder_table_ = build_encoder_table(*device_, cfg_, arch_, w_, kv_, scratch_);
}

std::vector<float> Model::embed(const std::vector<std::vector<int32_t>>& seqs) {
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) throw Error("this model is busy in another thread; use one model per thread");
    if (!arch_.encoder)
        throw Error(std::string("this is a generative model (") + arch_.name +
                    "): embed() needs an embedding model such as BERT");
    const size_t dim = (size_t)cfg_.dim;
    for (const auto& s : seqs) {
        if (s.empty()) throw Error("cannot embed an empty token sequence");
        if (s.size() > (size_t)encoder_max_seq_)
            throw Error("sequence of " + std::to_string(s.size()) + " tokens exceeds the encoder's n_ctx = " +
                        std::to_string(encoder_max_seq_) + " (truncate it)");
        check_tokens(s);
    }
    std::vector<float> out(seqs.size() * dim), hidden;
    std::vector<int32_t> ids, bounds;
    size_t first = 0;  // first sequence of the current pass
    while (first < seqs.size()) {
        size_t last = first;  // pack sequences while they fit one pass
        ids.clear();
        bounds.clear();
        while (last < seqs.size() && ids.size() + seqs[last].size() <= (size_t)scratch_.max_tokens) {
            const int32_t start = (int32_t)ids.size(), end = start + (int32_t)seqs[last].size();
            ids.insert(ids.end(), seqs[last].begin(), seqs[last].end());
            for (int32_t t = start; t < end; t++) bounds.insert(bounds.end(), {start, end});
            last++;
        }
        const size_t n = ids.size();
        device_->write_buffer(scratch_.prompt_ids, ids.data(), n * 4);
        device_->write_buffer(scratch_.segments, bounds.data(), bounds.size() * 4);
        ReplayState st;
        st.pos0 = 0;
        st.n_tokens = (uint32_t)n;
        device_->encode_dispatch_table(encoder_table_, st);
        hidden.resize(n * dim);
        device_->read_buffer(hidden.data(), scratch_.h, n * dim * 4);
        size_t offset = 0;
        for (size_t i = first; i < last; i++) {
            const size_t len = seqs[i].size();
            const float* h = hidden.data() + offset * dim;
            float* e = out.data() + i * dim;
            if (cfg_.pooling == 1) {  // mean over every token, [CLS] and [SEP] included (as sentence-transformers)
                std::vector<double> acc(dim, 0.0);
                for (size_t t = 0; t < len; t++)
                    for (size_t d = 0; d < dim; d++) acc[d] += h[t * dim + d];
                for (size_t d = 0; d < dim; d++) e[d] = (float)(acc[d] / (double)len);
            } else {  // CLS: first row; last token: last row
                const size_t row = cfg_.pooling == 2 ? 0 : len - 1;
                std::copy(h + row * dim, h + (row + 1) * dim, e);
            }
            if (cfg_.normalize_embeddings) {
                double ss = 0;
                for (size_t d = 0; d < dim; d++) ss += (double)e[d] * e[d];
                const float inv = (float)(1.0 / std::max(std::sqrt(ss), 1e-12));
                for (size_t d = 0; d < dim; d++) e[d] *= inv;
            }
            offset += len;
        }
        first = last;
    }
    n_past_ = 0;
    return out;
}

std::vector<std::pair<std::string, double>> Model::profile_embed(const std::vector<int32_t>& tokens) {
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) throw Error("this model is busy in another thread; use one model per thread");
    if (!arch_.encoder) throw Error("profile_embed needs an embedding model");
    if (tokens.empty() || tokens.size() > (size_t)encoder_max_seq_) throw Error("profile_embed: bad token count");
    check_tokens(tokens);
    device_->write_buffer(scratch_.prompt_ids, tokens.data(), tokens.size() * 4);
    std::vector<int32_t> bounds;
    for (size_t t = 0; t < tokens.size(); t++) bounds.insert(bounds.end(), {0, (int32_t)tokens.size()});
    device_->write_buffer(scratch_.segments, bounds.data(), bounds.size() * 4);
    ReplayState st;
    st.n_tokens = (uint32_t)tokens.size();
    std::vector<double> t = device_->time_commands(encoder_table_, st);
    std::vector<std::pair<std::string, double>> out;
    for (size_t i = 0; i < t.size(); i++) out.emplace_back(encoder_table_.labels[i], t[i]);
    return out;
}

}  // namespace akunu
