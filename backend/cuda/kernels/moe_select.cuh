// The router's top-k choice of one token on the GPU, with moe_route's
// meaning (core/kernel_params.h, backend/cpu/kernels/moe.cpp): probabilities
// by softmax (the sum in double, as the CPU) or sigmoid, the n_used largest
// with ties to the lower expert id, then the weights' normalization and
// scale. The choice walks the experts in (probability descending, id
// ascending) order, each pick the first expert after the previous one in
// that order, so it needs no per-expert array (n_experts up to 4096).
#pragma once
#include <cstdint>

#include "core/kernel_params.h"

namespace akunu {

constexpr uint32_t kMoeMaxUsed = 64;

__device__ inline void moe_route_token(const MoeRouteParams& p, const float* l, uint8_t* out) {
    const uint32_t n = p.n_experts, k = min(p.n_used, p.n_experts);
    float m = l[0], inv = 1.0f;
    if (p.gating != kMoeSigmoid) {
        for (uint32_t e = 1; e < n; e++) m = fmaxf(m, l[e]);
        double sum = 0.0;
        for (uint32_t e = 0; e < n; e++) sum += (double)expf(l[e] - m);
        inv = (float)(1.0 / sum);
    }
    auto prob = [&](uint32_t e) {
        return p.gating == kMoeSigmoid ? 1.0f / (1.0f + expf(-l[e])) : expf(l[e] - m) * inv;
    };
    int32_t* ids = reinterpret_cast<int32_t*>(out);
    float* w = reinterpret_cast<float*>(ids + p.n_used);
    float prev_p = 0.0f;
    int32_t prev_id = -1;
    for (uint32_t j = 0; j < k; j++) {
        int32_t best = -1;
        float bp = 0.0f;
        for (uint32_t e = 0; e < n; e++) {
            const float pe = prob(e);
            const bool after = prev_id < 0 || pe < prev_p || (pe == prev_p && (int32_t)e > prev_id);
            if (after && (best < 0 || pe > bp)) {
                best = (int32_t)e;
                bp = pe;
            }
        }
        if (best < 0) {  // NaN probabilities: the lowest id not chosen yet
            for (uint32_t e = 0; e < n && best < 0; e++) {
                bool taken = false;
                for (uint32_t q = 0; q < j; q++) taken |= ids[q] == (int32_t)e;
                if (!taken) best = (int32_t)e;
            }
            bp = prob((uint32_t)best);
        }
        ids[j] = best;
        w[j] = bp;
        prev_id = best;
        prev_p = bp;
    }
    if (p.norm_topk) {
        float s = 0.0f;
        for (uint32_t j = 0; j < k; j++) s += w[j];
        s = fmaxf(s, 6.103515625e-5f);
        for (uint32_t j = 0; j < k; j++) w[j] /= s;
    }
    if (p.weight_scale != 0.0f && p.weight_scale != 1.0f)
        for (uint32_t j = 0; j < k; j++) w[j] *= p.weight_scale;
}

}  // namespace akunu
