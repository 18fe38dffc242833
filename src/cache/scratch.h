// Activation buffers for one forward pass of up to max_tokens tokens,
// allocated once at load and shared by the prefill and decode tables
// (book, "Scratch Buffer Architecture").
#pragma once
#include <algorithm>
#include <vector>

#include "cache/owned_buffers.h"
#include "core/device.h"
#include "core/model_config.h"

namespace akunu {

struct ScratchBuffers {
    int max_tokens = 0;
    int max_chain = 0;
    Buffer h, xn, q, k, v, attn, proj, gate, up, act, logits;
    Buffer prompt_ids;  // prefill input, max_tokens ids
    Buffer chain_ids;   // decode chain: ids[0] in, ids[i+1] written by argmax or sample
    Buffer row_ids;     // prefill: argmax of each logits row
    Buffer segments;    // encoders: [start, end) of each token's sequence in a packed pass
    // Tensor parallelism (ModelConfig::tp_ranks > 1): this rank's slice of
    // each logits row, and the gathered slices before their interleaving.
    Buffer logits_shard, logits_stage;

    // logit_rows: rows of the logits buffer (encoders need none of it)
    void allocate(Device& d, const ModelConfig& c, int tokens, int chain, int logit_rows) {
        max_tokens = tokens;
        max_chain = chain;
        auto f = [&](size_t n) { return owned_.allocate(d, n * sizeof(float)); };
        size_t m = (size_t)tokens;
        h = f(m * c.dim);
        xn = f(m * c.dim);
        q = f(m * c.q_dim());
        k = f(m * c.kv_dim());
        v = f(m * c.kv_dim());
        attn = f(m * c.q_dim());
        proj = f(m * c.dim);
        const size_t row = (size_t)c.act_row_width();  // the dense FFN's or the MoE FFN's row
        gate = f(m * row);
        up = f(m * row);
        act = f(m * row);
        logits = f((size_t)std::max(logit_rows, 1) * c.vocab_size);
        prompt_ids = f(m);
        chain_ids = f((size_t)chain + 1);
        row_ids = f(m);
        segments = f(2 * m);
        if (c.tp_ranks > 1) {
            const size_t rows = (size_t)std::max(logit_rows, 1) * c.vocab_shard;
            logits_shard = f(rows);
            logits_stage = f(rows * c.tp_ranks);
        }
    }
    void release(Device& d) { owned_.release(d); }
    size_t bytes() const { return owned_.bytes(); }

private:
    OwnedBuffers owned_;
};

}  // namespace akunu
