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
// softmax over them as the prefill kernel does (attention_prefill.cuh): the G
// heads are the rows of a 16-row m16n8k16 product (rows past G zero), S = Q
// K^T from K's rows by ldmatrix, exponentials base 2 rounded to F16 as the A
// fragment of O += P V, V's B fragments by ldmatrix.trans. The warps then
// meet in warp order; with one used split the block writes the output, else
// its record goes to the scratch and the last split of the (row, group) to
// arrive (a counter) combines the records in ascending split order. So every
// sum a row's result goes through depends only on its sequence, position,
// the head size, n_splits (fixed per model and scratch size) and min_tiles
// (fixed per device), never on the rows of the pass: batch invariance holds.
//
// Meaning as attention_paged.cuh's CPU twin: Q rounded to F16, F32 scores
// times the scale, softmax weights rounded to F16 (here the unnormalized
// exp(s - running max), as in the prefill kernel), F32 sums.
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
#include "mma.cuh"
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

constexpr int kChunk = 16;                    // keys a warp takes at once: the k of P V
constexpr int kTileKeys = kChunk * kWarps;    // a split's keys are whole tiles of these
// Chunks a warp has in flight: its ring of (K, V) chunk pairs, rows of HD + 8
// halves (the padding keeps ldmatrix rows free of bank conflicts).
template <int HD>
constexpr int stages() { return HD == 64 ? 4 : 2; }
template <int HD>
constexpr int warp_ring_halves() { return stages<HD>() * 2 * kChunk * (HD + 8); }
template <int HD>
constexpr int shared_bytes() { return kWarps * warp_ring_halves<HD>() * 2; }

template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(PagedAttentionParams p, uint32_t n_splits, uint32_t min_tiles, const float* __restrict__ q,
                 const uint16_t* __restrict__ kc, const uint16_t* __restrict__ vc, float* __restrict__ out,
                 const int32_t* __restrict__ rows, const int32_t* __restrict__ tables, float* __restrict__ partials,
                 uint32_t* __restrict__ counters) {
    constexpr int S = stages<HD>(), LD = HD + 8;
    static_assert(G <= 8, "a group's heads are rows g < 8 of the product");
    extern __shared__ __align__(16) uint16_t rings[];  // [kWarps][S][2][kChunk][LD]: K then V
    // (a programmatic dependent: the projection after it is scheduled, and
    // streams its first weights, while this kernel runs)
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t kvh = blockIdx.x, t = blockIdx.y, z = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
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
    const uint32_t n_chunks = (k1 - k0 + kChunk - 1) / kChunk;
    const uint32_t mine = n_chunks > (uint32_t)warp ? (n_chunks - warp + kWarps - 1) / kWarps : 0;
    uint16_t* ring = rings + warp * warp_ring_halves<HD>();

    // The warp's chunk i (keys k0 + (warp + i kWarps) 16 + 0..15) to stage b;
    // keys past the split: zeros (masked below). Every call commits a group,
    // empty past the warp's last chunk, so the waits count alike.
    auto issue = [&](uint32_t i, int b) {
        if (i < mine) {
            uint16_t* ks = ring + b * 2 * kChunk * LD;
            uint16_t* vs = ks + kChunk * LD;
            const uint32_t c0 = k0 + (warp + i * kWarps) * kChunk;
#pragma unroll
            for (int c = lane; c < kChunk * HD / 8; c += 32) {
                const int key = c / (HD / 8), col = (c % (HD / 8)) * 8;
                const uint32_t j = c0 + key;
                const bool valid = j < k1;
                const size_t at = (valid ? pool_row(table, p.block_size, lo + j) * kv_dim : 0) + col;
                copy16_async(ks + key * LD + col, krows + at, valid);
                copy16_async(vs + key * LD + col, vrows + at, valid);
            }
        }
        copy_commit();
    };
#pragma unroll
    for (int i = 0; i < S - 1; i++) issue(i, i);

    // Q of the G heads as A fragments (row g = head g, rounded to F16; rows g >= G and g + 8 zero).
    uint32_t qa[HD / 16][4];
    {
        const float* qs = q + (size_t)t * p.q_stride + (size_t)(kvh * G + (g < G ? g : 0)) * HD + 2 * tq;
#pragma unroll
        for (int s16 = 0; s16 < HD / 16; s16++) {
            const float2 a = *reinterpret_cast<const float2*>(qs + 16 * s16);
            const float2 b = *reinterpret_cast<const float2*>(qs + 16 * s16 + 8);
            qa[s16][0] = g < G ? pack_half2(a.x, a.y) : 0u;
            qa[s16][2] = g < G ? pack_half2(b.x, b.y) : 0u;
            qa[s16][1] = qa[s16][3] = 0u;
        }
    }
    const float scale = p.scale * 1.4426950408889634f;  // log2 e: exp2 below
    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m = -INFINITY, l = 0.0f;  // row g's running max (base 2) and this lane's share of its sum

    for (uint32_t i = 0; i < mine; i++) {  // warp-uniform
        issue(i + S - 1, (i + S - 1) % S);  // (the stage consumed last iteration)
        copy_wait<S - 1>();
        __syncwarp();  // chunk i landed for every lane
        const uint16_t* ks = ring + (i % S) * 2 * kChunk * LD;
        const uint16_t* vs = ks + kChunk * LD;

        // S = Q K^T, 16 rows x 16 keys (B(k = d, n = key) = K[key][d]); one
        // ldmatrix gives both key octets' B fragments of a 16-dim step.
        float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
        for (int d16 = 0; d16 < HD / 16; d16++) {
            uint32_t b[4];
            ldmatrix_x4(b, ks + ((lane / 16) * 8 + lane % 8) * LD + 16 * d16 + 8 * (lane / 8 % 2));
            mma_16816(s[0], qa[d16], b[0], b[1]);
            mma_16816(s[1], qa[d16], b[2], b[3]);
        }
        // Row g's scores (c = 0, 1 of each octet; c = 2, 3 are the zero rows g + 8): scaled, keys past
        // the split masked; online softmax across the quad that holds the row.
        const uint32_t cbase = k0 + (warp + i * kWarps) * kChunk;
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const bool live = cbase + nt * 8 + 2 * tq + c < k1;
                s[nt][c] = live ? __fmul_rn(s[nt][c], scale) : -INFINITY;
                mx = fmaxf(mx, s[nt][c]);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m, mx);  // (finite: a chunk has a live key)
        const float alpha = exp2_ftz(m - mn);
        m = mn;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                s[nt][c] = exp2_ftz(s[nt][c] - mn);
                sum += s[nt][c];
            }
        l = l * alpha + sum;
        if (__any_sync(0xffffffffu, alpha != 1.0f)) {
#pragma unroll
            for (int d = 0; d < HD / 8; d++) {
                o[d][0] *= alpha;
                o[d][1] *= alpha;
            }
        }
        // O += P V (P's rows g + 8 zero).
        const uint32_t pa[4] = {pack_half2(s[0][0], s[0][1]), 0u, pack_half2(s[1][0], s[1][1]), 0u};
#pragma unroll
        for (int nt = 0; nt < HD / 8; nt += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, vs + (lane % 16) * LD + (nt + lane / 16) * 8);
            mma_16816(o[nt], pa, b[0], b[1]);
            mma_16816(o[nt + 1], pa, b[2], b[3]);
        }
        __syncwarp();  // every lane's reads of this stage done before it is refilled
    }
    copy_wait<0>();  // no copy outstanding at exit
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);

    // The warps meet in shared memory (over the rings, now read) in warp order.
    __syncthreads();
    float* wacc = reinterpret_cast<float*>(rings);  // [kWarps][G][HD]
    __shared__ float wm[kWarps][G], wl[kWarps][G];
    if (g < G) {
        if (tq == 0) {
            wm[warp][g] = m;
            wl[warp][g] = l;
        }
        float* row = wacc + ((size_t)warp * G + g) * HD + 2 * tq;
#pragma unroll
        for (int d = 0; d < HD / 8; d++) *reinterpret_cast<float2*>(row + 8 * d) = make_float2(o[d][0], o[d][1]);
    }
    __syncthreads();
    const size_t rec = HD + 2;
    __shared__ float bmax[G], bsum[G];
    if (threadIdx.x < G) {
        const int h = threadIdx.x;
        float bm = -INFINITY;
        for (int w = 0; w < kWarps; w++) bm = fmaxf(bm, wm[w][h]);
        float bl = 0.0f;
        for (int w = 0; w < kWarps; w++) bl += wm[w][h] == -INFINITY ? 0.0f : wl[w][h] * exp2f(wm[w][h] - bm);
        bmax[h] = bm;
        bsum[h] = bl;
    }
    __syncthreads();
    for (int h = 0; h < G; h++) {
        const float bm = bmax[h];
        float* r = partials + (((size_t)t * p.n_heads + kvh * G + h) * n_splits + z) * rec;
        float* orow = out + (size_t)t * p.out_stride + (size_t)(kvh * G + h) * HD;
        const float inv = active == 1 ? 1.0f / bsum[h] : 1.0f;
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
        const float inv = 1.0f / bl;
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
