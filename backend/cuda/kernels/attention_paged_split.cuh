// attention_paged for the generated rows of a batch pass (one query token a
// sequence): flash-decoding over key splits with a KV group's query heads
// served by one read of each K / V row.
//
// Grid (n_kv_heads, rows, n_splits), kWarps warps a block; a block serves the
// group's G query heads of one row. A row's n keys [lo, pos] go to
// active = min(n_splits, ceil(n / kMinKeys)) splits of ceil(n / active)
// consecutive keys (blocks past `active` return at once); within a split the
// keys go in rounds, consecutive keys to consecutive lane groups of each
// warp, each lane group keeping an online softmax (running max, sum, weighted
// V for every head of the group). The lane groups and then the warps meet in shared memory in warp order; with one
// active split the block writes the output, else its record goes to the
// scratch and the last split of the (row, group) to arrive (a counter)
// combines the records in ascending split order. So every sum a row's result
// goes through depends only on its sequence, position, the head size and
// n_splits (fixed per model and scratch size, never by the rows of the
// pass): batch invariance holds.
//
// A key's dimensions are spread over head_dim / 8 lanes, eight each, so a
// warp reads several keys at once (split_kernel). Precision as
// attention_paged.cuh.
//
// Included once, by attention_paged.cuh (launch_split).
#pragma once
#include <algorithm>
#include <cfloat>

#include "core/half.h"
#include "core/kernel_params.h"
#include "core/kv_layout.h"
#include "cuda_kernel.h"
#include "paged_pool.cuh"

namespace akunu {
namespace attention_paged_split {

constexpr int kWarps = 4;
constexpr uint32_t kMinKeys = 32;  // keys a split takes at least
constexpr int kMaxGroup = 8;       // query heads a KV head serves, at most
constexpr uint32_t kMaxSplits = 16;
constexpr uint32_t kSliceRows = 64;  // rows a launch (bounds the partials)
// Counters live in the upper half of the split-K scratch's counter area (the
// GEMM's tile counters use the lower half; both are zero between launches).
constexpr size_t kCounterOffset = 32u << 10;
constexpr size_t kCounterBytes = 32u << 10;
constexpr size_t kPartialsOffset = 64u << 10;

// Eight F16 values (one 16-byte load) as floats.
__device__ __forceinline__ void load8(const uint16_t* src, float (&out)[8]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; i++) out[i] = f16_to_f32(h[i]);
}

// A key's HD dimensions are held by L = HD / 8 lanes, eight each (one
// 16-byte load), so a warp reads KG = 32 / L keys at once, one a lane group;
// each group keeps its own online softmax over the keys it reads, and the
// groups of a warp merge at the end in a fixed butterfly.
template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(PagedAttentionParams p, uint32_t n_splits, const float* __restrict__ q,
                 const uint16_t* __restrict__ kc, const uint16_t* __restrict__ vc, float* __restrict__ out,
                 const int32_t* __restrict__ rows, const int32_t* __restrict__ tables, float* __restrict__ partials,
                 uint32_t* __restrict__ counters) {
    constexpr int hd = HD, L = HD / 8, KG = 32 / L;
    constexpr int U = KG >= 4 ? 2 : 4;  // keys a lane group has in flight
    constexpr int kRound = kWarps * KG * U;
    const uint32_t kvh = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / L, d0 = (lane % L) * 8;
    const uint32_t seq = (uint32_t)rows[2 * (size_t)t], pos = (uint32_t)rows[2 * (size_t)t + 1];
    const uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const uint32_t n = pos + 1 - lo;
    const uint32_t active = std::min(n_splits, (n + kMinKeys - 1) / kMinKeys);
    if (z >= active) return;
    const uint32_t per = (n + active - 1) / active;
    const uint32_t k0 = z * per, k1 = std::min(n, k0 + per);
    const int32_t* table = tables + (size_t)seq * p.max_blocks;
    const size_t kv_dim = (size_t)p.n_kv_heads * hd;
    const size_t koff = (size_t)kvh * hd + d0;

    float qv[G][8];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float* qs = q + (size_t)t * p.q_stride + (size_t)(kvh * G + g) * hd + d0;
#pragma unroll
        for (int i = 0; i < 8; i++) qv[g][i] = f16_to_f32(f32_to_f16(qs[i]));
    }
    float m[G], l[G], acc[G][8];
#pragma unroll
    for (int g = 0; g < G; g++) {
        m[g] = -FLT_MAX;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[g][i] = 0.0f;
    }

    for (uint32_t r = k0; r < k1; r += kRound) {
        float kf[U][8], vf[U][8];
        bool live[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint32_t j = r + (uint32_t)((warp * U + u) * KG + group);
            live[u] = j < k1;
            if (live[u]) {
                const size_t at = pool_row(table, p.block_size, lo + j) * kv_dim + koff;
                load8(kc + at, kf[u]);
                load8(vc + at, vf[u]);
            }
        }
#pragma unroll
        for (int g = 0; g < G; g++) {
            float s[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                s[u] = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; i++) s[u] += qv[g][i] * kf[u][i];
            }
#pragma unroll
            for (int o = L / 2; o > 0; o >>= 1)
#pragma unroll
                for (int u = 0; u < U; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
            float mnew = m[g];
#pragma unroll
            for (int u = 0; u < U; u++) {
                s[u] *= p.scale;
                if (live[u]) mnew = fmaxf(mnew, s[u]);
            }
            const float corr = expf(m[g] - mnew);
            l[g] *= corr;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[g][i] *= corr;
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (!live[u]) continue;
                const float e = expf(s[u] - mnew);
                l[g] += e;
#pragma unroll
                for (int i = 0; i < 8; i++) acc[g][i] += e * vf[u][i];
            }
            m[g] = mnew;
        }
    }

    // The lane groups of a warp merge (butterfly over the group bits), then
    // the warps meet in shared memory in warp order.
    __shared__ float wm[kWarps][G], wl[kWarps][G], wacc[kWarps][G][hd];
#pragma unroll
    for (int g = 0; g < G; g++) {
        float bm = m[g];
#pragma unroll
        for (int o = L; o < 32; o <<= 1) bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, o));
        const float sc = m[g] == -FLT_MAX ? 0.0f : expf(m[g] - bm);
        float lv = l[g] * sc;
        float av[8];
#pragma unroll
        for (int i = 0; i < 8; i++) av[i] = acc[g][i] * sc;
#pragma unroll
        for (int o = L; o < 32; o <<= 1) {
            lv += __shfl_xor_sync(0xffffffffu, lv, o);
#pragma unroll
            for (int i = 0; i < 8; i++) av[i] += __shfl_xor_sync(0xffffffffu, av[i], o);
        }
        if (lane == 0) {
            wm[warp][g] = bm;
            wl[warp][g] = lv;
        }
        if (group == 0)
#pragma unroll
            for (int i = 0; i < 8; i++) wacc[warp][g][d0 + i] = av[i];
    }
    __syncthreads();
    const size_t rec = hd + 2;
    __shared__ float bmax[G], bsum[G];
    if (threadIdx.x < G) {
        const int g = threadIdx.x;
        float bm = -FLT_MAX;
        for (int w = 0; w < kWarps; w++) bm = fmaxf(bm, wm[w][g]);
        float bl = 0.0f;
        for (int w = 0; w < kWarps; w++) bl += wm[w][g] == -FLT_MAX ? 0.0f : wl[w][g] * expf(wm[w][g] - bm);
        bmax[g] = bm;
        bsum[g] = bl;
    }
    __syncthreads();
    for (int g = 0; g < G; g++) {
        const float bm = bmax[g];
        float* r = partials + (((size_t)t * p.n_heads + kvh * G + g) * n_splits + z) * rec;
        float* o = out + (size_t)t * p.out_stride + (size_t)(kvh * G + g) * hd;
        const float inv = active == 1 ? 1.0f / bsum[g] : 1.0f;
        for (int d = threadIdx.x; d < hd; d += kWarps * 32) {
            float v = 0.0f;
            for (int w = 0; w < kWarps; w++) v += wacc[w][g][d] * (wm[w][g] == -FLT_MAX ? 0.0f : expf(wm[w][g] - bm));
            if (active == 1) o[d] = v * inv;  // one split: the output itself
            else r[d] = v;
        }
        if (threadIdx.x == 0 && active > 1) {
            r[hd] = bm;
            r[hd + 1] = bsum[g];
        }
    }
    if (active == 1) return;
    __threadfence();  // this split's record visible before its arrival is counted
    __syncthreads();
    __shared__ bool last;
    uint32_t* counter = counters + (size_t)t * p.n_kv_heads + kvh;
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == active - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Each split's weight exp(m_s - M) / L once, in shared memory; then a
    // thread a dimension sums the records in ascending split order.
    __shared__ float weight[G][kMaxSplits];
    if (threadIdx.x < G) {
        const int g = threadIdx.x;
        const float* r0 = partials + ((size_t)t * p.n_heads + kvh * G + g) * n_splits * rec;
        float bm = -FLT_MAX;
        for (uint32_t s = 0; s < active; s++) bm = fmaxf(bm, __ldcg(r0 + s * rec + hd));
        float bl = 0.0f;
        for (uint32_t s = 0; s < active; s++) {
            const float e = expf(__ldcg(r0 + s * rec + hd) - bm);
            weight[g][s] = e;
            bl += __ldcg(r0 + s * rec + hd + 1) * e;
        }
        const float inv = 1.0f / bl;
        for (uint32_t s = 0; s < active; s++) weight[g][s] *= inv;
    }
    __syncthreads();
    for (int g = 0; g < G; g++) {
        const float* r0 = partials + ((size_t)t * p.n_heads + kvh * G + g) * n_splits * rec;
        float* o = out + (size_t)t * p.out_stride + (size_t)(kvh * G + g) * hd;
        for (int d = threadIdx.x; d < hd; d += kWarps * 32) {
            float v = 0.0f;
            for (uint32_t s = 0; s < active; s++) v += __ldcg(r0 + s * rec + d) * weight[g][s];
            o[d] = v;
        }
    }
    if (threadIdx.x == 0) *counter = 0;  // ready for the next launch
}

// Whether the split kernel serves this shape (else the per-head kernel does).
// (F16 caches; other element types take the per-head kernel)
inline bool supports(const PagedAttentionParams& p) {
    const uint32_t g = p.n_kv_heads ? p.n_heads / p.n_kv_heads : 0;
    return p.k_type == kKvF16 && p.v_type == kKvF16 && (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256) &&
           (g == 1 || g == 2 || g == 4 || g == 8) &&
           (size_t)kSliceRows * p.n_kv_heads * 4 <= kCounterBytes;
}

// Splits a row's keys go into: as many as the scratch holds for a slice of
// rows, at most kMaxSplits; from the model's shape alone.
inline uint32_t n_splits_for(const PagedAttentionParams& p, size_t scratch_bytes) {
    if (scratch_bytes <= kPartialsOffset) return 0;
    const size_t per_split = (size_t)kSliceRows * p.n_heads * (p.head_dim + 2) * 4;
    return (uint32_t)std::min<size_t>(kMaxSplits, (scratch_bytes - kPartialsOffset) / per_split);
}

template <int HD, int G>
void launch_dg(const CudaArgs& a, const PagedAttentionParams& p, uint32_t n_splits, uint32_t rows) {
    float* partials = reinterpret_cast<float*>(a.split_scratch + kPartialsOffset);
    uint32_t* counters = reinterpret_cast<uint32_t*>(a.split_scratch + kCounterOffset);
    for (uint32_t t0 = 0; t0 < rows; t0 += kSliceRows) {
        const uint32_t nt = std::min(kSliceRows, rows - t0);
        split_kernel<HD, G><<<dim3(p.n_kv_heads, nt, n_splits), kWarps * 32, 0, a.stream>>>(
            p, n_splits, a.b<float>(0) + (size_t)t0 * p.q_stride, a.b<uint16_t>(1), a.b<uint16_t>(2),
            a.b<float>(3) + (size_t)t0 * p.out_stride, a.b<int32_t>(4) + 2 * (size_t)t0, a.b<int32_t>(5), partials,
            counters);
    }
}

template <int HD>
void launch_d(const CudaArgs& a, const PagedAttentionParams& p, uint32_t n_splits, uint32_t rows) {
    switch (p.n_heads / p.n_kv_heads) {
        case 1: launch_dg<HD, 1>(a, p, n_splits, rows); break;
        case 2: launch_dg<HD, 2>(a, p, n_splits, rows); break;
        case 4: launch_dg<HD, 4>(a, p, n_splits, rows); break;
        default: launch_dg<HD, 8>(a, p, n_splits, rows); break;
    }
}

// The first `rows` rows of the pass through the split kernel; false when it
// cannot take them (shape, no scratch), leaving them to the per-head kernel.
inline bool launch(const CudaArgs& a, const PagedAttentionParams& p, uint32_t rows) {
    if (rows == 0) return true;
    if (!supports(p) || !a.split_scratch) return false;
    const uint32_t n_splits = n_splits_for(p, a.split_scratch_bytes);
    if (n_splits == 0) return false;
    switch (p.head_dim) {
        case 64: launch_d<64>(a, p, n_splits, rows); break;
        case 128: launch_d<128>(a, p, n_splits, rows); break;
        default: launch_d<256>(a, p, n_splits, rows); break;
    }
    return true;
}

}  // namespace attention_paged_split
}  // namespace akunu
