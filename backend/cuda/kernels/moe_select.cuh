// The router's top-k choice of one token on the GPU, one warp a token, with
// moe_route's meaning (core/kernel_params.h, backend/cpu/kernels/moe.cpp):
// probabilities by softmax (the sum in double, in expert order, as the CPU)
// or sigmoid, the n_used largest with ties to the lower expert id, then the
// weights' normalization and scale. The lanes compute the probabilities into
// shared memory and each pick is a warp arg-max over the experts not taken
// yet (NaNs as the CPU's scan takes them); the probabilities' sum, whose
// order fixes its rounding, runs on lane 0, and the chosen weights' sum in
// every lane, in pick order.
#pragma once
#include <cstdint>

#include "core/kernel_params.h"

namespace akunu {

constexpr uint32_t kMoeMaxUsed = 64;

// The warp's arg-max of (probability, -id); best < 0: no candidate.
__device__ inline void warp_best_expert(int32_t& best, float& bp) {
    for (int off = 16; off > 0; off >>= 1) {
        const int32_t ob = __shfl_xor_sync(0xffffffffu, best, off);
        const float op = __shfl_xor_sync(0xffffffffu, bp, off);
        if (ob >= 0 && (best < 0 || op > bp || (op == bp && ob < best))) {
            best = ob;
            bp = op;
        }
    }
}

// q: n_experts floats of shared memory for this warp.
__device__ inline void moe_route_token_warp(const MoeRouteParams& p, const float* l, uint8_t* out, float* q) {
    const uint32_t lane = threadIdx.x & 31u, n = p.n_experts, k = min(p.n_used, p.n_experts);
    const bool softmax = p.gating != kMoeSigmoid;
    float m = __int_as_float(0x7fc00000);  // NaN: fmaxf keeps the other operand
    for (uint32_t e = lane; e < n; e += 32) m = fmaxf(m, l[e]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    for (uint32_t e = lane; e < n; e += 32) q[e] = softmax ? expf(l[e] - m) : 1.0f / (1.0f + expf(-l[e]));
    __syncwarp();
    if (softmax) {
        float inv = 0.0f;
        if (lane == 0) {
            double sum = 0.0;
#pragma unroll 8  // (the loads ahead of the adds)
            for (uint32_t e = 0; e < n; e++) sum += (double)q[e];
            inv = (float)(1.0 / sum);
        }
        inv = __shfl_sync(0xffffffffu, inv, 0);
        for (uint32_t e = lane; e < n; e += 32) q[e] *= inv;
        __syncwarp();
    }
    // Each pick is the CPU's scan: the lowest id not taken yet when its
    // probability is NaN, else the largest probability among those not taken
    // (NaNs passed over, ties to the lower id). A taken expert's probability
    // becomes -1 in q (probabilities are never negative). Pick j ends up in
    // lane j % 32 (held[j / 32]); every lane adds the picks' weights in pick
    // order, as the CPU's normalization sums them.
    int32_t held_id[2] = {0, 0};
    float held_w[2] = {0.0f, 0.0f}, wsum = 0.0f;
    for (uint32_t j = 0; j < k; j++) {
        int32_t first = INT32_MAX, best = -1;
        float bp = 0.0f;
        for (uint32_t e = lane; e < n; e += 32) {
            const float pe = q[e];
            if (pe == -1.0f) continue;
            first = min(first, (int32_t)e);
            if (pe == pe && (best < 0 || pe > bp)) {  // (a lane's ids ascend: ties keep the lower)
                best = (int32_t)e;
                bp = pe;
            }
        }
        for (int off = 16; off > 0; off >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, off));
        warp_best_expert(best, bp);
        const float pf = q[first];  // (k <= n: some expert is left)
        if (pf != pf || best < 0) {
            best = first;
            bp = pf;
        }
        __syncwarp();
        if (lane == 0) q[best] = -1.0f;
        __syncwarp();
        if (lane == j % 32) {  // (constant indices: the pair stays in registers)
            if (j < 32) {
                held_id[0] = best;
                held_w[0] = bp;
            } else {
                held_id[1] = best;
                held_w[1] = bp;
            }
        }
        wsum += bp;
    }
    // The CPU's std::max(sum, clamp): a NaN sum stays NaN.
    const float s = wsum < 6.103515625e-5f ? 6.103515625e-5f : wsum;
    int32_t* ids = reinterpret_cast<int32_t*>(out);
    float* w = reinterpret_cast<float*>(ids + p.n_used);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t j = lane + 32 * h;
        if (j >= k) continue;
        float v = held_w[h];
        if (p.norm_topk) v /= s;
        if (p.weight_scale != 0.0f && p.weight_scale != 1.0f) v *= p.weight_scale;
        ids[j] = held_id[h];
        w[j] = v;
    }
}

// Where slot j (of expert e within the tensor) stands among the route's held
// slots in that same ascending (expert id, slot) order: the held slots before
// it. One lane a slot finds a whole route's order at once.
__device__ inline uint32_t slot_place(const int32_t* ids, uint32_t n_used, uint32_t n_experts, int32_t first,
                                      int32_t e, uint32_t j) {
    uint32_t place = 0;
    for (uint32_t k = 0; k < n_used; k++) {
        const int32_t ek = ids[k] - first;
        const bool held = ek >= 0 && (uint32_t)ek < n_experts;
        place += held && (ek < e || (ek == e && k < j));
    }
    return place;
}

// The slot of a token's route after (prev_e, prev_j) in ascending (expert
// id, slot) order among the ids the tensor holds (ids: the token's route ids
// less the tensor's first expert); false when none is left. Weighted sums
// add a token's slots in this order, the CPU's.
__device__ inline bool next_slot_by_expert(const int32_t* ids, uint32_t n_used, uint32_t n_experts, int32_t first,
                                           int32_t& prev_e, uint32_t& prev_j) {
    int32_t be = INT32_MAX;
    uint32_t bj = UINT32_MAX;
    for (uint32_t j = 0; j < n_used; j++) {
        const int32_t e = ids[j] - first;
        const bool held = e >= 0 && (uint32_t)e < n_experts;
        const bool after = e > prev_e || (e == prev_e && j > prev_j);
        if (held && after && (e < be || (e == be && j < bj))) {
            be = e;
            bj = j;
        }
    }
    if (bj == UINT32_MAX) return false;
    prev_e = be;
    prev_j = bj;
    return true;
}

}  // namespace akunu
