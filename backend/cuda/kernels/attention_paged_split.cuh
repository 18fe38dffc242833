// attention_paged for the generated rows of a batch pass (one query token a
// sequence): flash-decoding over key splits on the tensor cores, a KV group's
// query heads served by one read of each K / V row.
//
// Grid (n_kv_heads, rows, n_splits), kWarps warps a block; a block serves the
// group's G query heads of one row. A row's n keys [lo, pos] go to splits of
// whole tiles of kTileKeys keys, as many as n_splits allows with at least
// min_tiles tiles a split (blocks past the used ones return at once). Within
// a split, warp w takes the 16-key chunks w, w + kWarps, ...: each warp
// streams its own chunks through its own ring of shared memory (cp.async,
// stages<HD>() in flight, no block barrier in the walk) and keeps an online
// softmax over them on the tensor cores (attention_warp_chunk.cuh). The warps then
// meet in warp order; with one used split the block writes the output, else
// its record goes to the scratch and the last split of the (row, group) to
// arrive (a counter) combines the records in ascending split order. So every
// sum a row's result goes through depends only on its sequence, position,
// the head size, n_splits (fixed per model and scratch size) and min_tiles
// (fixed per device), never on the rows of the pass: batch invariance holds.
// A head's sink (PagedAttentionParams::sinks) joins once, where the row's
// output is written: in the one used split, or in the combine.
//
// Meaning as attention_warp_chunk.cuh states it.
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
#include "attention_warp_chunk.cuh"
#include "paged_pool.cuh"

namespace akunu {
namespace attention_paged_split {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;       // query heads a KV head serves, at most (the product's 16 rows hold them)
constexpr uint32_t kMaxSplits = 16;
constexpr uint32_t kSliceRows = 64;  // rows a launch (bounds the partials)
// Counters live in the upper half of the split-K scratch's counter area (the
// GEMM's tile counters use the lower half; both are zero between launches).
constexpr size_t kCounterOffset = 32u << 10;
constexpr size_t kCounterBytes = 32u << 10;
constexpr size_t kPartialsOffset = 64u << 10;

using attention_warp_chunk::kKeys;  // keys a warp takes at once
constexpr int kTileKeys = kKeys * kWarps;  // a split's keys are whole tiles of these
// Chunks a warp has in flight: its ring of (K, V) chunks.
template <int HD>
constexpr int stages() { return HD == 64 ? 4 : 2; }
template <int HD>
constexpr int warp_ring_halves() { return stages<HD>() * attention_warp_chunk::chunk_halves<HD>(); }
template <int HD>
constexpr int shared_bytes() { return kWarps * warp_ring_halves<HD>() * 2; }

template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(PagedAttentionParams p, uint32_t n_splits, uint32_t min_tiles, const float* __restrict__ q,
                 const uint16_t* __restrict__ kc, const uint16_t* __restrict__ vc, float* __restrict__ out,
                 const int32_t* __restrict__ rows, const int32_t* __restrict__ tables, float* __restrict__ partials,
                 uint32_t* __restrict__ counters, const float* __restrict__ sinks) {
    namespace wc = attention_warp_chunk;
    constexpr int S = stages<HD>(), CH = wc::chunk_halves<HD>();
    static_assert(G <= 8, "a group's heads are rows g < 8 of the product");
    extern __shared__ __align__(16) uint16_t rings[];  // [kWarps][S] chunks
    // (a programmatic dependent: the projection after it is scheduled, and
    // streams its first weights, while this kernel runs)
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t kvh = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
    const int warp = threadIdx.x / 32;
    const uint32_t seq = (uint32_t)rows[2 * (size_t)t], pos = (uint32_t)rows[2 * (size_t)t + 1];
    const uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const uint32_t n = pos + 1 - lo;
    // whole tiles a split: as many splits as n_splits allows, each min_tiles tiles at least
    const uint32_t unit = kTileKeys * min_tiles;
    const uint32_t want = std::min(n_splits, (n + unit - 1) / unit);
    const uint32_t per = ((n + want - 1) / want + kTileKeys - 1) / kTileKeys * kTileKeys;
    const uint32_t active = (n + per - 1) / per;
    if (z >= active) return;
    const uint32_t k0 = z * per, k1 = std::min(n, k0 + per);
    const int32_t* table = tables + (size_t)seq * p.max_blocks;
    const size_t kv_dim = (size_t)p.n_kv_heads * HD;
    const uint16_t* krows = kc + (size_t)kvh * HD;
    const uint16_t* vrows = vc + (size_t)kvh * HD;
    const uint32_t n_chunks = (k1 - k0 + kKeys - 1) / kKeys;
    const uint32_t mine = n_chunks > (uint32_t)warp ? (n_chunks - warp + kWarps - 1) / kWarps : 0;
    uint16_t* ring = rings + warp * warp_ring_halves<HD>();

    // The warp's chunk i (keys k0 + (warp + i kWarps) 16 + 0..15) to ring slot b;
    // keys past the split: zeros (masked below). Every call commits a group,
    // empty past the warp's last chunk, so the waits count alike.
    auto issue = [&](uint32_t i, int b) {
        if (i < mine) {
            const uint32_t c0 = k0 + (warp + i * kWarps) * kKeys;
            auto row = [&](int key, ptrdiff_t& off) {
                if (c0 + key >= k1) return false;
                off = (ptrdiff_t)(pool_row(table, p.block_size, lo + c0 + key) * kv_dim);
                return true;
            };
            wc::stage_chunk<HD>(ring + b * CH, krows, vrows, row);
        }
        copy_commit();
    };
#pragma unroll
    for (int i = 0; i < S - 1; i++) issue(i, i);

    uint32_t qa[HD / 16][4];
    wc::load_q<HD, G>(q + (size_t)t * p.q_stride + (size_t)kvh * G * HD, qa);
    const ScoreMap scale2 = score_map(p.scale, p.softcap, wc::kLog2e);
    float m, l, o[HD / 8][4];
    wc::start<HD>(m, l, o);
    auto live = [&](uint32_t i, uint16_t*) {
        return (int)std::min<uint32_t>(kKeys, k1 - (k0 + (warp + i * kWarps) * kKeys));
    };
    wc::walk<HD, S>(ring, mine, issue, live, qa, scale2, m, l, o);

    // The warps meet in shared memory (over the rings, now read) in warp order.
    __syncthreads();
    float* wacc = reinterpret_cast<float*>(rings);  // [kWarps][G][HD]
    __shared__ float wm[kWarps][G], wl[kWarps][G];
    wc::store_warp<HD, G>(m, l, o, 1.0f, wm[warp], wl[warp], wacc + (size_t)warp * G * HD);
    __syncthreads();
    const size_t rec = HD + 2;
    __shared__ float bmax[G], bsum[G], bfactor[G];
    if (threadIdx.x < G) {
        const int h = threadIdx.x;
        float bm = -INFINITY;
        for (int w = 0; w < kWarps; w++) bm = fmaxf(bm, wm[w][h]);
        float bl = 0.0f;
        for (int w = 0; w < kWarps; w++) bl += wm[w][h] == -INFINITY ? 0.0f : wl[w][h] * exp2f(wm[w][h] - bm);
        // one split holds the row's whole softmax: the sink joins it here (the
        // records of several keep theirs for the combine)
        bfactor[h] = active == 1 ? sink_factor<true>(sinks, kvh * G + h, bm, bl) : 1.0f;
        bmax[h] = bm;
        bsum[h] = bl;
    }
    __syncthreads();
    for (int h = 0; h < G; h++) {
        const float bm = bmax[h];
        float* r = partials + (((size_t)t * p.n_heads + kvh * G + h) * n_splits + z) * rec;
        float* orow = out + (size_t)t * p.out_stride + (size_t)(kvh * G + h) * HD;
        const float inv = active == 1 ? bfactor[h] / bsum[h] : 1.0f;
        for (int d = threadIdx.x; d < HD; d += kWarps * 32) {
            float v = 0.0f;
            for (int w = 0; w < kWarps; w++)
                v += wm[w][h] == -INFINITY ? 0.0f : wacc[((size_t)w * G + h) * HD + d] * exp2f(wm[w][h] - bm);
            if (active == 1) orow[d] = v * inv;  // one split: the output itself
            else r[d] = v;
        }
        if (threadIdx.x == 0 && active > 1) {
            r[HD] = bm;
            r[HD + 1] = bsum[h];
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
    // Each split's weight 2^(m_s - M) / L once, in shared memory; then a
    // thread a dimension sums the records in ascending split order. Every
    // split's value is loaded before any is used (kMaxSplits loads in flight,
    // not one L2 round trip a split: at a few hundred keys this combine was
    // most of the kernel's time).
    __shared__ float weight[G][kMaxSplits];
    if (threadIdx.x < G) {
        const int h = threadIdx.x;
        const float* r0 = partials + ((size_t)t * p.n_heads + kvh * G + h) * n_splits * rec;
        float ms[kMaxSplits], ls[kMaxSplits];
#pragma unroll
        for (uint32_t s = 0; s < kMaxSplits; s++) {
            ms[s] = s < active ? __ldcg(r0 + s * rec + HD) : -INFINITY;
            ls[s] = s < active ? __ldcg(r0 + s * rec + HD + 1) : 0.0f;
        }
        float bm = -INFINITY;
#pragma unroll
        for (uint32_t s = 0; s < kMaxSplits; s++) bm = fmaxf(bm, ms[s]);
        float bl = 0.0f;
#pragma unroll
        for (uint32_t s = 0; s < kMaxSplits; s++)
            if (s < active) {
                const float e = exp2f(ms[s] - bm);
                weight[h][s] = e;
                bl += ls[s] * e;
            }
        const float c = sink_factor<true>(sinks, kvh * G + h, bm, bl);  // the row's sink joins here, once
        const float inv = c / bl;
        for (uint32_t s = 0; s < active; s++) weight[h][s] *= inv;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < G; h++) {
        const float* r0 = partials + ((size_t)t * p.n_heads + kvh * G + h) * n_splits * rec;
        float* orow = out + (size_t)t * p.out_stride + (size_t)(kvh * G + h) * HD;
        for (int d = threadIdx.x; d < HD; d += kWarps * 32) {
            float part[kMaxSplits];
#pragma unroll
            for (uint32_t s = 0; s < kMaxSplits; s++) part[s] = s < active ? __ldcg(r0 + s * rec + d) : 0.0f;
            float v = 0.0f;
#pragma unroll
            for (uint32_t s = 0; s < kMaxSplits; s++)
                if (s < active) v += part[s] * weight[h][s];
            orow[d] = v;
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
    allow_dynamic_shared((const void*)split_kernel<HD, G>, shared_bytes<HD>());  // (beside the static arrays)
    for (uint32_t t0 = 0; t0 < rows; t0 += kSliceRows) {
        const uint32_t nt = std::min(kSliceRows, rows - t0);
        launch_pdl(split_kernel<HD, G>, dim3(p.n_kv_heads, nt, n_splits), kWarps * 32, shared_bytes<HD>(), a,
            p, n_splits, a.tuning ? std::max(1u, a.tuning->paged_split_tiles) : 1u, a.b<float>(0) + (size_t)t0 * p.q_stride, a.b<uint16_t>(1), a.b<uint16_t>(2),
            a.b<float>(3) + (size_t)t0 * p.out_stride, a.b<int32_t>(4) + 2 * (size_t)t0, a.b<int32_t>(5), partials,
            counters, p.sinks ? (const float*)a.b<float>(6) : nullptr);
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
