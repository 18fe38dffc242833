// The arithmetic of a warp's keys in the tiled decode attention kernels
// (attention_decode_gqa.cuh for one stream, attention_paged_split.cuh for the
// generated rows of a batch): K / V rows staged in shared memory, L = HD / 8
// lanes a key (8 dimensions each, one 16-byte load), a lane group of L lanes
// per key and U keys a group a step, GC query heads sharing every K / V row.
// One definition, so both kernels round alike.
#pragma once
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "async_copy.cuh"

namespace akunu {
namespace attention_key_tile {

constexpr int kDims = 8;  // dims of a key row a lane holds

// Eight F16 values (one 16-byte load) as floats.
__device__ __forceinline__ void halves8(const uint4& w, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&w);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 v = __half22float2(h[i]);
        f[2 * i] = v.x;
        f[2 * i + 1] = v.y;
    }
}

// Tiles of K then V rows ([Stages][2][T][HD] F16 in shared memory) fill by
// cp.async, Stages - 1 ahead: waits for tile i (every thread's copies), has
// `issue(j, stage)` refill the stage tile i - 1 used with tile j = i +
// Stages - 1, and returns tile i's K rows (its V rows follow, T * HD on).
// Block-uniform.
template <int Stages, int T, int HD, class Issue>
__device__ __forceinline__ const uint16_t* next_tile(const uint16_t* tiles, uint32_t i, Issue& issue) {
    copy_wait<Stages - 2>();
    __syncthreads();
    issue(i + Stages - 1, (int)((i + Stages - 1) % Stages));
    return tiles + (size_t)(i % Stages) * 2 * T * HD;
}

// Empty online softmaxes: no key seen yet.
template <int GC>
__device__ __forceinline__ void start_softmax(float (&m)[GC], float (&l)[GC], float (&acc)[GC][kDims]) {
#pragma unroll
    for (int gh = 0; gh < GC; gh++) {
        m[gh] = -FLT_MAX;
        l[gh] = 0.0f;
#pragma unroll
        for (int d = 0; d < kDims; d++) acc[gh][d] = 0.0f;
    }
}

// U keys of this lane group (kr / vr: this lane's 8 dims of each key's K and
// V rows; live[u] false: past the range, weight 0) into the GC online
// softmaxes of the group: running max m, sum l, weighted V acc.
template <int GC, int U, int L>
__device__ __forceinline__ void add_keys(const uint4 (&kr)[U], const uint4 (&vr)[U], const bool (&live)[U],
                                         const float (&qf)[GC][kDims], float scale, float (&m)[GC], float (&l)[GC],
                                         float (&acc)[GC][kDims]) {
    float s[U][GC];
#pragma unroll
    for (int u = 0; u < U; u++) {
        float kf[8];
        halves8(kr[u], kf);
#pragma unroll
        for (int gh = 0; gh < GC; gh++) {
            float x = 0.0f;
#pragma unroll
            for (int d = 0; d < kDims; d++) x += qf[gh][d] * kf[d];
            s[u][gh] = x;
        }
    }
#pragma unroll
    for (int o = 1; o < L; o <<= 1)
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int gh = 0; gh < GC; gh++) s[u][gh] += __shfl_xor_sync(0xffffffffu, s[u][gh], o);
#pragma unroll
    for (int gh = 0; gh < GC; gh++) {
        float mnew = m[gh];
#pragma unroll
        for (int u = 0; u < U; u++) {
            s[u][gh] *= scale;
            if (live[u]) mnew = fmaxf(mnew, s[u][gh]);
        }
        const float corr = expf(m[gh] - mnew);
        l[gh] *= corr;
#pragma unroll
        for (int d = 0; d < kDims; d++) acc[gh][d] *= corr;
#pragma unroll
        for (int u = 0; u < U; u++) {
            s[u][gh] = live[u] ? expf(s[u][gh] - mnew) : 0.0f;
            l[gh] += s[u][gh];
        }
        m[gh] = mnew;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        float vf[8];
        halves8(vr[u], vf);
#pragma unroll
        for (int gh = 0; gh < GC; gh++)
#pragma unroll
            for (int d = 0; d < kDims; d++) acc[gh][d] += s[u][gh] * vf[d];
    }
}

// The lane groups of a warp meet (lanes sub, sub + L, ... hold the same
// dims), in a fixed butterfly; afterwards every lane holds the warp's state.
template <int GC, int L>
__device__ __forceinline__ void merge_key_groups(float (&m)[GC], float (&l)[GC], float (&acc)[GC][kDims]) {
#pragma unroll
    for (int o = L; o < 32; o <<= 1)
#pragma unroll
        for (int gh = 0; gh < GC; gh++) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m[gh], o), l2 = __shfl_xor_sync(0xffffffffu, l[gh], o);
            const float mn = fmaxf(m[gh], m2), c1 = expf(m[gh] - mn), c2 = expf(m2 - mn);
            l[gh] = l[gh] * c1 + l2 * c2;
#pragma unroll
            for (int d = 0; d < kDims; d++)
                acc[gh][d] = acc[gh][d] * c1 + __shfl_xor_sync(0xffffffffu, acc[gh][d], o) * c2;
            m[gh] = mn;
        }
}

}  // namespace attention_key_tile
}  // namespace akunu
