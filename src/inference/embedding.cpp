// Encoder models (BERT): load-time setup and sentence embeddings. One
// sequence per pass of the encoder table; the hidden states are pooled on
// the host (a few hundred floats per token) and L2-normalized when the
// model says so (sentence-transformers' Normalize module).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/table_builder.h"
#include "inference/model.h"

namespace akunu {

namespace {
constexpr int kDefaultEncoderContext = 512;
}

void Model::load_encoder(const LoadOptions& opt) {
    // An encoder has no use for more context than its learned positions: a
    // larger request (one -c for several models in a server) is capped there.
    int n_ctx = std::min(opt.n_ctx > 0 ? opt.n_ctx : kDefaultEncoderContext, cfg_.context_length);
    check_memory(n_ctx);
    kv_.allocate(*device_, cfg_.n_layers, n_ctx, cfg_.kv_dim());
    scratch_.allocate(*device_, cfg_, n_ctx, 1, 1);
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
        if (s.size() > (size_t)kv_.n_ctx)
            throw Error("sequence of " + std::to_string(s.size()) + " tokens exceeds the encoder's n_ctx = " +
                        std::to_string(kv_.n_ctx) + " (truncate it)");
        check_tokens(s);
    }
    std::vector<float> out(seqs.size() * dim), hidden;
    for (size_t i = 0; i < seqs.size(); i++) {
        const std::vector<int32_t>& s = seqs[i];
        const size_t n = s.size();
        device_->write_buffer(scratch_.prompt_ids, s.data(), n * 4);
        ReplayState st;
        st.pos0 = 0;
        st.n_tokens = (uint32_t)n;
        device_->encode_dispatch_table(encoder_table_, st);
        float* e = out.data() + i * dim;
        if (cfg_.pooling == 1) {  // mean over every token, [CLS] and [SEP] included (as sentence-transformers)
            hidden.resize(n * dim);
            device_->read_buffer(hidden.data(), scratch_.h, n * dim * 4);
            std::vector<double> acc(dim, 0.0);
            for (size_t t = 0; t < n; t++)
                for (size_t d = 0; d < dim; d++) acc[d] += hidden[t * dim + d];
            for (size_t d = 0; d < dim; d++) e[d] = (float)(acc[d] / (double)n);
        } else {  // CLS: first row; last token: last row
            const size_t row = cfg_.pooling == 2 ? 0 : n - 1;
            device_->read_buffer(e, scratch_.h, dim * 4, row * dim * 4);
        }
        if (cfg_.normalize_embeddings) {
            double ss = 0;
            for (size_t d = 0; d < dim; d++) ss += (double)e[d] * e[d];
            const float inv = (float)(1.0 / std::max(std::sqrt(ss), 1e-12));
            for (size_t d = 0; d < dim; d++) e[d] *= inv;
        }
    }
    n_past_ = 0;
    return out;
}

}  // namespace akunu
