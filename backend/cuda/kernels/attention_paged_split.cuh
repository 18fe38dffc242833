// attention_paged for the generated rows of a batch pass (one query token a
// sequence): flash-decoding over key splits with a KV group's query heads
// served by one read of each K / V row.
//
// Grid (n_kv_heads, rows, n_splits), kWarps warps a block; a block serves the
// group's G query heads of one row. A row's n keys [lo, pos] go to splits of
// whole 16 KB tiles (tile_keys), as many as n_splits allows (blocks past the
// used ones return at once); a split's tiles stream through shared memory,
// kStages in flight, consecutive keys of a tile to consecutive lane groups
// of each warp, each lane group keeping an online softmax (running max, sum,
// weighted V for every head of the group; attention_key_tile.cuh). The lane
// groups and then the warps meet in warp order; with one used split the
// block writes the output, else its record goes to the scratch and the last
// split of the (row, group) to arrive (a counter) combines the records in
// ascending split order. So every sum a row's result goes through depends
// only on its sequence, position, the head size and n_splits (fixed per
// model and scratch size, never by the rows of the pass): batch invariance
// holds.
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
#include "async_copy.cuh"
#include "attention_key_tile.cuh"
#include "paged_pool.cuh"

namespace akunu {
namespace attention_paged_split {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;       // query heads a KV head serves, at most
constexpr uint32_t kMaxSplits = 16;
constexpr uint32_t kSliceRows = 64;  // rows a launch (bounds the partials)
// Counters live in the upper half of the split-K scratch's counter area (the
// GEMM's tile counters use the lower half; both are zero between launches).
constexpr size_t kCounterOffset = 32u << 10;
constexpr size_t kCounterBytes = 32u << 10;
constexpr size_t kPartialsOffset = 64u << 10;

// A tile's K and V rows: 16 KB (tile_keys<HD>() keys), kStages in flight.
template <int HD>
constexpr int tile_keys() { return 4096 / HD; }
constexpr int kStages = 3;
template <int HD>
constexpr int tile_bytes() { return kStages * 2 * tile_keys<HD>() * HD * 2; }

// A key's HD dimensions are held by L = HD / 8 lanes, eight each (one
// 16-byte load), so a warp takes KW = 32 / L keys at once, one a lane group;
// each group keeps its own online softmax over the keys it reads, and the
// groups of a warp merge at the end in a fixed butterfly. The split's keys
// stream through shared memory in tiles (cp.async, kStages in flight: a
// split of a few tiles has every load in flight from the start), their pool
// rows looked up through the block table as they are issued.
template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(PagedAttentionParams p, uint32_t n_splits, const float* __restrict__ q,
                 const uint16_t* __restrict__ kc, const uint16_t* __restrict__ vc, float* __restrict__ out,
                 const int32_t* __restrict__ rows, const int32_t* __restrict__ tables, float* __restrict__ partials,
                 uint32_t* __restrict__ counters) {
    using attention_key_tile::kDims;
    constexpr int hd = HD, L = HD / kDims, KW = 32 / L, T = tile_keys<HD>(), U = T / kWarps / KW;
    static_assert(U >= 1 && T % (kWarps * KW) == 0, "a warp's share of a tile is whole key steps");
    extern __shared__ __align__(16) uint16_t tiles[];  // [kStages][2][T][HD]: K then V
    // (a programmatic dependent: the projection after it is scheduled, and
    // streams its first weights, while this kernel runs)
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t kvh = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / L, d0 = (lane % L) * kDims;
    const uint32_t seq = (uint32_t)rows[2 * (size_t)t], pos = (uint32_t)rows[2 * (size_t)t + 1];
    const uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const uint32_t n = pos + 1 - lo;
    // whole tiles a split: as many splits as n_splits allows, each a tile at least
    const uint32_t want = std::min(n_splits, (n + T - 1) / T);
    const uint32_t per = ((n + want - 1) / want + T - 1) / T * T;
    const uint32_t active = (n + per - 1) / per;
    if (z >= active) return;
    const uint32_t k0 = z * per, k1 = std::min(n, k0 + per);
    const int32_t* table = tables + (size_t)seq * p.max_blocks;
    const size_t kv_dim = (size_t)p.n_kv_heads * hd;
    const uint16_t* krows = kc + (size_t)kvh * hd;
    const uint16_t* vrows = vc + (size_t)kvh * hd;
    const uint32_t n_tiles = (k1 - k0 + T - 1) / T;

    // Tile i to stage b (keys past the split: zeros, weight 0). Every call
    // commits a group, empty past the last tile, so the waits count alike.
    auto issue = [&](uint32_t i, int b) {
        if (i < n_tiles) {
            uint16_t* kt = tiles + (size_t)b * 2 * T * HD;
            uint16_t* vt = kt + T * HD;
            for (int c = threadIdx.x; c < T * HD / 8; c += kWarps * 32) {
                const int key = c / (HD / 8), col = (c % (HD / 8)) * 8;
                const uint32_t j = k0 + i * T + key;
                const bool valid = j < k1;
                const size_t at = (valid ? pool_row(table, p.block_size, lo + j) * kv_dim : 0) + col;
                copy16_async(kt + key * HD + col, krows + at, valid);
                copy16_async(vt + key * HD + col, vrows + at, valid);
            }
        }
        copy_commit();
    };
#pragma unroll
    for (int i = 0; i < kStages - 1; i++) issue(i, i);

    // q of the G heads, this lane's 8 dims, rounded to F16
    float qv[G][kDims];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float* qs = q + (size_t)t * p.q_stride + (size_t)(kvh * G + g) * hd + d0;
#pragma unroll
        for (int i = 0; i < kDims; i++) qv[g][i] = f16_to_f32(f32_to_f16(qs[i]));
    }
    float m[G], l[G], acc[G][kDims];
    attention_key_tile::start_softmax<G>(m, l, acc);
    for (uint32_t i = 0; i < n_tiles; i++) {  // block-uniform
        const uint16_t* kt = attention_key_tile::next_tile<kStages, T, HD>(tiles, i, issue);
        const uint16_t* vt = kt + T * HD;
        uint4 kr[U], vr[U];
        bool live[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int key = warp * (T / kWarps) + u * KW + group;
            live[u] = k0 + i * T + key < k1;
            kr[u] = *reinterpret_cast<const uint4*>(kt + key * HD + d0);
            vr[u] = *reinterpret_cast<const uint4*>(vt + key * HD + d0);
        }
        attention_key_tile::add_keys<G, U, L>(kr, vr, live, qv, p.scale, m, l, acc);
    }
    copy_wait<0>();  // no copy outstanding at exit
    attention_key_tile::merge_key_groups<G, L>(m, l, acc);

    // The warps meet in shared memory in warp order.
    __shared__ float wm[kWarps][G], wl[kWarps][G], wacc[kWarps][G][hd];
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (lane == 0) {
            wm[warp][g] = m[g];
            wl[warp][g] = l[g];
        }
        if (group == 0)
#pragma unroll
            for (int i = 0; i < kDims; i++) wacc[warp][g][d0 + i] = acc[g][i];
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
    // thread a dimension sums the records in ascending split order. Every
    // split's value is loaded before any is used (kMaxSplits loads in flight,
    // not one L2 round trip a split: at a few hundred keys this combine was
    // most of the kernel's time).
    __shared__ float weight[G][kMaxSplits];
    if (threadIdx.x < G) {
        const int g = threadIdx.x;
        const float* r0 = partials + ((size_t)t * p.n_heads + kvh * G + g) * n_splits * rec;
        float ms[kMaxSplits], ls[kMaxSplits];
#pragma unroll
        for (uint32_t s = 0; s < kMaxSplits; s++) {
            ms[s] = s < active ? __ldcg(r0 + s * rec + hd) : -FLT_MAX;
            ls[s] = s < active ? __ldcg(r0 + s * rec + hd + 1) : 0.0f;
        }
        float bm = -FLT_MAX;
#pragma unroll
        for (uint32_t s = 0; s < kMaxSplits; s++) bm = fmaxf(bm, ms[s]);
        float bl = 0.0f;
#pragma unroll
        for (uint32_t s = 0; s < kMaxSplits; s++)
            if (s < active) {
                const float e = expf(ms[s] - bm);
                weight[g][s] = e;
                bl += ls[s] * e;
            }
        const float inv = 1.0f / bl;
        for (uint32_t s = 0; s < active; s++) weight[g][s] *= inv;
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float* r0 = partials + ((size_t)t * p.n_heads + kvh * G + g) * n_splits * rec;
        float* o = out + (size_t)t * p.out_stride + (size_t)(kvh * G + g) * hd;
        for (int d = threadIdx.x; d < hd; d += kWarps * 32) {
            float part[kMaxSplits];
#pragma unroll
            for (uint32_t s = 0; s < kMaxSplits; s++) part[s] = s < active ? __ldcg(r0 + s * rec + d) : 0.0f;
            float v = 0.0f;
#pragma unroll
            for (uint32_t s = 0; s < kMaxSplits; s++)
                if (s < active) v += part[s] * weight[g][s];
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
    allow_dynamic_shared((const void*)split_kernel<HD, G>, tile_bytes<HD>());  // (beside the static arrays)
    for (uint32_t t0 = 0; t0 < rows; t0 += kSliceRows) {
        const uint32_t nt = std::min(kSliceRows, rows - t0);
        launch_pdl(split_kernel<HD, G>, dim3(p.n_kv_heads, nt, n_splits), kWarps * 32, tile_bytes<HD>(), a,
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
