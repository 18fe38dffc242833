// Device buffers the sample kernel reads and writes (book Part V, sampled
// decode): allocated once at load so sampling allocates nothing per token.
#pragma once
#include <vector>

#include "cache/owned_buffers.h"
#include "core/device.h"

namespace akunu {

// Bytes after the work buffer's two vocab-sized arrays for a GPU sampler's
// per-block partials and state.
constexpr size_t SamplerBuffersScratchBytes = 16384;

struct SamplerBuffers {
    static constexpr int kMaxBias = 1024;  // logit-bias entries
    Buffer history;  // int32 per position: the token fed there (penalty window)
    Buffer bias;     // kMaxBias (int32 id, float value) pairs
    Buffer mask;     // one bit per token, 1 = allowed (grammar)
    Buffer work;     // vocab floats (processed logits) + vocab int32 + SamplerBuffersScratchBytes

    void allocate(Device& d, int vocab, int n_ctx) {
        auto f = [&](size_t bytes) { return owned_.allocate(d, bytes); };
        history = f(((size_t)n_ctx + 1) * 4);
        bias = f((size_t)kMaxBias * 8);
        mask = f(((size_t)vocab + 31) / 32 * 4);
        work = f((size_t)vocab * 8 + SamplerBuffersScratchBytes);
    }
    void release(Device& d) { owned_.release(d); }
    size_t bytes() const { return owned_.bytes(); }

private:
    OwnedBuffers owned_;
};

}  // namespace akunu
