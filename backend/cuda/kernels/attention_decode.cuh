// Decode attention (one query token) as flash-decoding: the key range is cut
// into splits that run as separate blocks; each keeps an online softmax (running
// max, sum, weighted V) and the last split of a head to finish combines them.
// The launch shape depends only on the cache size, never on the position, so
// the kernel can be captured once in a decode graph and replayed at every
// position (the position comes from device memory there).
//
// Precision: Q is rounded to F16 as the CPU twin does; the softmax weights are
// not (the twin rounds each normalized weight to F16, which a split cannot do
// before the global sum is known). The difference stays inside the per-op
// tolerance of one F16 step of the weights.
//
// Included once, by attention.cu (namespace attention_decode: takes, absorbs, launch); long caches
// with grouped-query attention take attention_decode_gqa.cuh's kernel.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "act_q8.cuh"
#include "device_math.cuh"
#include "attention_key_tile.cuh"
#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "core/kv_layout.h"
#include "cuda_kernel.h"
#include "head_prologue.cuh"
#include "kv_cache.cuh"

namespace akunu {
namespace attention_decode {

// A block has 64 keys in flight (8 warps x 8), so a split of 128 keys is two
// memory round trips. Splits shorter than that cost more in their combine
// (partials, a fence, an atomic, a re-read) than they save: at the short
// contexts of chat turns a head is one split and writes its output directly.
constexpr int kWarps = 8;
constexpr int kUnroll = 8;                 // keys a warp has in flight
constexpr uint32_t kMinKeysPerSplit = 128;  // below this a split is not worth a block
constexpr uint32_t kMaxSplits = 32;

// D consecutive F16 values as floats, in one load where D allows.
template <int D>
__device__ void load_halves(const uint16_t* src, float* out) {
    if constexpr (D == 8) {
        const uint4 w = *reinterpret_cast<const uint4*>(src);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
#pragma unroll
        for (int i = 0; i < 8; i++) out[i] = f16_to_f32(h[i]);
    } else if constexpr (D == 4) {
        const uint2 w = *reinterpret_cast<const uint2*>(src);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
#pragma unroll
        for (int i = 0; i < 4; i++) out[i] = f16_to_f32(h[i]);
    } else if constexpr (D == 2) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(src);
        out[0] = f16_to_f32((uint16_t)(w & 0xffffu));
        out[1] = f16_to_f32((uint16_t)(w >> 16));
    } else {
        out[0] = f16_to_f32(src[0]);
    }
}

// The split's result in the workspace: D * 32 weighted-V sums, then max and sum.
struct SplitSlot {
    float* base;
    uint32_t head_dim;
    __device__ float* acc() const { return base; }
    __device__ float& m() const { return base[head_dim]; }
    __device__ float& l() const { return base[head_dim + 1]; }
};

// The heads' sink logits of an attention command (AttentionParams::sinks:
// buffer 7), or nullptr without sinks.
inline const float* sinks_of(const CudaArgs& a, const AttentionParams& p) {
    return p.sinks ? a.b<float>(7) : nullptr;
}

// Output d of head h, and with q8.q its 8-bit rounding for the next command
// (a Q8Link: the output projection's GEMV then skips its rounding kernel).
// Called by whole warps over 32 consecutive d (head_dim % 32 == 0).
__device__ __forceinline__ void write_out(const AttentionParams& p, uint32_t h, uint32_t d, float v, float* out,
                                          ActQ8 q8) {
    const size_t at = (size_t)h * p.head_dim + d;
    out[at] = v;
    if (q8.q) round_block32_warp(v, q8.q + (at - at % kQ8Block), q8.ds + at / kQ8Block);
}

// The block's end, from its warps' softmax states in shared memory (max wm,
// sum wl, weighted-V sums wacc, `ld` floats a warp): a head of one used split
// writes its output; otherwise the split's partial goes to the workspace and
// the last split of the head to finish combines them all. Head h's sink
// (sinks: AttentionParams::sinks' logits, or nullptr) joins where the output
// is written: in the one split, or in the combine (never in a partial).
__device__ void finish_head(const AttentionParams& p, uint32_t h, uint32_t split, uint32_t used, uint32_t n_splits,
                            const float* wm, const float* wl, const float* wacc, int ld, float* out, float* partials,
                            uint32_t* counters, ActQ8 q8, const float* sinks) {
    float bm = -FLT_MAX;
    for (int w = 0; w < kWarps; w++) bm = fmaxf(bm, wm[w]);
    float bl = 0.0f;
    for (int w = 0; w < kWarps; w++) bl += wl[w] * expf(wm[w] - bm);

    if (used == 1) {
        const float c = sink_factor<false>(sinks, h, bm, bl);
        for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < kWarps; w++) v += wacc[w * ld + d] * expf(wm[w] - bm);
            write_out(p, h, d, v * c / bl, out, q8);
        }
        return;
    }
    const SplitSlot mine{partials + ((size_t)h * n_splits + split) * (p.head_dim + 2), p.head_dim};
    for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; w++) v += wacc[w * ld + d] * expf(wm[w] - bm);
        mine.acc()[d] = v;
    }
    if (threadIdx.x == 0) {
        mine.m() = bm;
        mine.l() = bl;
    }
    __threadfence();  // this block's partial is visible before it is counted
    __syncthreads();
    __shared__ bool is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[h], 1u) == used - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    // The last block of this head: combine every split.
    float gm = -FLT_MAX;
    for (uint32_t s = 0; s < used; s++)
        gm = fmaxf(gm, __ldcg(&partials[((size_t)h * n_splits + s) * (p.head_dim + 2) + p.head_dim]));
    float gl = 0.0f;
    for (uint32_t s = 0; s < used; s++) {
        const float* slot = partials + ((size_t)h * n_splits + s) * (p.head_dim + 2);
        gl += __ldcg(&slot[p.head_dim + 1]) * expf(__ldcg(&slot[p.head_dim]) - gm);
    }
    const float c = sink_factor<false>(sinks, h, gm, gl);
    for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
        float v = 0.0f;
        for (uint32_t s = 0; s < used; s++) {
            const float* slot = partials + ((size_t)h * n_splits + s) * (p.head_dim + 2);
            v += __ldcg(&slot[d]) * expf(__ldcg(&slot[p.head_dim]) - gm);
        }
        write_out(p, h, d, v * c / gl, out, q8);
    }
    if (threadIdx.x == 0) counters[h] = 0;  // ready for the next layer
}

// This block's key range after lo and the splits in use (see the kernels),
// and where the keys are. Key j (position lo + j) is at ring row row(j); or,
// counted from lo's row lo_row, step(j) rows on: j, less the ring's rows from
// key jw on, where the ring wraps. The keys a query sees are no more than the
// rows (launch_attention checks), so they wrap at most once; on a
// full-context cache row(j) is lo + j and jw is past every key. (Two forms:
// the per-head kernels keep their speed with row, the grouped one with step.)
struct SplitRange {
    uint32_t pos, lo, j0, j1, used, lo_row, rows, jw;
    __device__ __forceinline__ uint32_t row(uint32_t j) const { return kv_cache::ring_add(lo_row, j, rows); }
    __device__ __forceinline__ ptrdiff_t step(uint32_t j) const {
        return (ptrdiff_t)j - (j >= jw ? (ptrdiff_t)rows : 0);
    }
};
__device__ __forceinline__ SplitRange split_range(const AttentionParams& p, uint32_t n_splits, uint32_t split,
                                                  const uint32_t* replay_pos,
                                                  uint32_t min_keys = kMinKeysPerSplit) {
    const uint32_t pos = replay_position(replay_pos, p.pos0);
    const uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const uint32_t n = pos + 1 - lo;
    const uint32_t chunk = max(min_keys, (n + n_splits - 1) / n_splits);
    const uint32_t j0 = split * chunk;
    // Splits past the keys exit at once; the rest combine only when there are several.
    const uint32_t lo_row = kv_ring_row(lo, p.max_ctx);
    return {pos, lo, j0, min(n, j0 + chunk), min(n_splits, (n + chunk - 1) / chunk), lo_row, p.max_ctx,
            p.max_ctx - lo_row};
}

// Grid (n_heads, n_splits), kWarps warps per block; a warp takes one key at
// a time, its lanes D dims each, in loads of 8 bytes at most: the kernel for
// q or caches not 16-byte aligned (the lane-group kernel below needs them so).
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_kernel(AttentionParams p, uint32_t n_splits, const float* q, const uint16_t* kc,
                            const uint16_t* vc, float* out, float* partials, uint32_t* counters,
                            const uint32_t* replay_pos, ActQ8 q8, const float* sinks) {
    const uint32_t h = blockIdx.x, split = blockIdx.y;
    const SplitRange r = split_range(p, n_splits, split, replay_pos);
    const uint32_t j0 = r.j0, j1 = r.j1, used = r.used;  // keys [j0, j1) after lo
    const uint32_t kv_dim = p.n_kv_heads * p.head_dim;
    const size_t koff = (size_t)(h / (p.n_heads / p.n_kv_heads)) * p.head_dim;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (split >= used) return;  // touches nothing: see attention_decode_groups_kernel
    pdl_wait();
    pdl_launch_dependents();

    float qv[D];
    const float* qsrc = q + (size_t)h * p.head_dim + lane * D;
#pragma unroll
    for (int d = 0; d < D; d++) qv[d] = f16_to_f32(f32_to_f16(qsrc[d]));

    const ScoreMap score = score_map(p.scale, p.softcap, 1.0f);
    float m = -FLT_MAX, l = 0.0f, acc[D];
#pragma unroll
    for (int d = 0; d < D; d++) acc[d] = 0.0f;
    for (uint32_t jb = j0 + warp * kUnroll; jb < j1; jb += kWarps * kUnroll) {
        // K and V rows of kUnroll keys requested together: one memory round trip per step.
        float s[kUnroll], vv[kUnroll][D];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            s[u] = 0.0f;
            if (jb + u < j1) {
                const size_t at = (size_t)r.row(jb + u) * kv_dim + koff + lane * D;
                float kv[D];
                load_halves<D>(kc + at, kv);
                load_halves<D>(vc + at, vv[u]);
#pragma unroll
                for (int d = 0; d < D; d++) s[u] += qv[d] * kv[d];
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int u = 0; u < kUnroll; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
        float mnew = m;
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            s[u] = score.cap(s[u]);
            s[u] *= score.mul;
            if (jb + u < j1) mnew = fmaxf(mnew, s[u]);
        }
        const float corr = expf(m - mnew);
        l *= corr;
#pragma unroll
        for (int d = 0; d < D; d++) acc[d] *= corr;
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            if (jb + u >= j1) continue;
            const float e = expf(s[u] - mnew);
            l += e;
#pragma unroll
            for (int d = 0; d < D; d++) acc[d] += e * vv[u][d];
        }
        m = mnew;
    }

    // The block's warps meet in shared memory.
    __shared__ float wm[kWarps], wl[kWarps], wacc[kWarps][32 * D];
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
#pragma unroll
    for (int d = 0; d < D; d++) wacc[warp][lane * D + d] = acc[d];
    __syncthreads();
    finish_head(p, h, split, used, n_splits, wm, wl, &wacc[0][0], 32 * D, out, partials, counters, q8, sinks);
}

// Grid (n_heads, n_splits), kWarps warps per block (the default kernel): a
// warp takes KW = 32 / L keys at a time, L = HD / 32 lanes a key with 32
// dimensions each, so a lane's K and V slices are four 16-byte loads each
// and a key's dot product is 32 lane-local FMAs and log2(L) shuffles (the
// warp-per-key kernel above: D FMAs and 5 shuffles a key, 8-byte loads).
// kKeyUnroll steps in flight: 8 warps x 8 keys x 2 = 128 keys of head_dim
// 128 per memory round trip. Each lane group keeps its own online softmax;
// the groups of a warp meet by shuffles, the warps in shared memory.
constexpr int kKeyUnroll = 2;

using attention_key_tile::halves8;  // eight F16 values (one 16-byte load) as floats

// A lane's 32 dims of one key's K and V rows (64 bytes each, 16-byte aligned).
__device__ __forceinline__ void load_slices(const uint16_t* k, const uint16_t* v, uint4 (&kr)[4], uint4 (&vr)[4]) {
    const uint4* kp = reinterpret_cast<const uint4*>(k);
    const uint4* vp = reinterpret_cast<const uint4*>(v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        kr[i] = kp[i];
        vr[i] = vp[i];
    }
}

// Before the wait (the previous kernel, the prologue, still writing this
// step's row), asks L2 for the block's K and V rows (keys [r.j0, r.j1)):
// rows of earlier steps, long evicted by the step's weights, so their DRAM
// latency overlaps the prologue. A hint only: L2 is where the prologue's
// writes land, and the loads after the wait read what is there.
template <int HD>
__device__ __forceinline__ void prefetch_kv_rows(const uint16_t* kc, const uint16_t* vc, const SplitRange& r,
                                                 uint32_t kv_dim, size_t koff) {
    constexpr uint32_t kLines = (HD * 2 + 127) / 128;  // 128-byte lines a head's row
    for (uint32_t i = threadIdx.x; i < (r.j1 - r.j0) * 2 * kLines; i += blockDim.x) {
        const uint32_t key = i / (2 * kLines), line = i % kLines;
        const uint16_t* base = (i / kLines) % 2 ? vc : kc;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(base + (size_t)r.row(r.j0 + key) * kv_dim + koff + 64 * line));
    }
}

// qk_norm_rope_kv's inputs when the attention does its work (Fused): q is
// the attention's own, k and v this step's rows, the caches the attention's.
struct HeadPrologue {
    QKRopeKVParams p;
    const float *k, *v, *q_norm, *k_norm, *factors;
};

template <int HD, bool Fused>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_groups_kernel(AttentionParams p, uint32_t n_splits, const float* q, uint16_t* kc,
                                   uint16_t* vc, float* out, float* partials, uint32_t* counters,
                                   const uint32_t* replay_pos, ActQ8 q8, HeadPrologue pro, const float* sinks) {
    constexpr int L = HD / 32, KW = 32 / L, U = kKeyUnroll;
    const uint32_t h = blockIdx.x, split = blockIdx.y;
    const SplitRange r = split_range(p, n_splits, split, replay_pos);
    const uint32_t kv_dim = p.n_kv_heads * HD;
    const size_t koff = (size_t)(h / (p.n_heads / p.n_kv_heads)) * HD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / L, sub = lane % L;
    // A split past the keys touches no memory and leaves at once, before the
    // wait (launch_pdl's contract holds through split 0 of every head, which
    // is always used and waits): at the default 4096-position cache most of
    // the grid's 32 splits a head are such blocks.
    if (split >= r.used) return;

    // Fused: the prologue's work for this head (qk_norm_rope_kv, whose kernel
    // is not launched; head_prologue.cuh): every block normalizes and rotates
    // its q head; the blocks of the last split also this step's key, which
    // their loop reads from shared memory (new_j), and one block of each KV
    // head stores the step's K / V rows to the caches (no block of this grid
    // reads them there). The RoPE angles are taken before the wait.
    const float* qhead = q + (size_t)h * HD;
    __shared__ __align__(16) float qs[Fused ? HD : 4], ks[Fused ? HD : 4];
    __shared__ __align__(16) uint16_t knew[Fused ? HD : 8], vnew[Fused ? HD : 8];
    uint32_t new_j = UINT32_MAX;
    HeadPairs pairs{};
    if constexpr (Fused) pairs = head_pairs_at(pro.p, r.pos, pro.factors, pro.q_norm, pro.k_norm);
    prefetch_kv_rows<HD>(kc, vc, r, kv_dim, koff);
    // The K / V rows of the warp's first step, into registers before the
    // wait. Rows of keys before this step's
    // were written by earlier steps, by kernels that had finished before the
    // one ahead of this started (launch_pdl: every kernel waits before it
    // lets its dependents start), so only this step's row (jnew, the
    // prologue's) waits. Their latency overlaps the kernel ahead.
    const uint16_t* kbase = kc + koff + sub * 32;
    const uint16_t* vbase = vc + koff + sub * 32;
    const uint32_t jnew = r.pos - r.lo;
    auto load_rows = [&](uint32_t jb, uint4 (&kr)[U][4], uint4 (&vr)[U][4]) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const uint32_t j = jb + u * KW + g;
#pragma unroll
            for (int i = 0; i < 4; i++) kr[u][i] = vr[u][i] = make_uint4(0, 0, 0, 0);
            if (j < r.j1 && j != jnew) {
                const size_t at = (size_t)r.row(j) * kv_dim;
                load_slices(kbase + at, vbase + at, kr[u], vr[u]);
            }
        }
    };
    uint4 kr[U][4], vr[U][4];
    const uint32_t jfirst = r.j0 + warp * KW * U;
    load_rows(jfirst, kr, vr);
    pdl_wait();
    pdl_launch_dependents();
    if constexpr (Fused) {
        const uint32_t group = p.n_heads / p.n_kv_heads, kvh = h / group;
        const bool has_new = split == r.used - 1;
        const uint32_t i0 = pairs.at.i0, i1 = pairs.at.i1;
        if (pairs.active) {
            pairs.a0 = qhead[i0];
            pairs.a1 = qhead[i1];
            if (has_new) {
                const float* kr = pro.k + kvh * HD;
                pairs.b0 = kr[i0];
                pairs.b1 = kr[i1];
                vnew[i0] = f32_to_f16(pro.v[kvh * HD + i0]);
                vnew[i1] = f32_to_f16(pro.v[kvh * HD + i1]);
            }
        }
        norm_rope_pairs(pro.p, pairs, has_new, qs, ks);
        if (pairs.active) {
            qs[i0] = pairs.a0;
            qs[i1] = pairs.a1;
            if (has_new) {
                knew[i0] = f32_to_f16(pairs.b0);
                knew[i1] = f32_to_f16(pairs.b1);
                if (h % group == 0) {  // this step's row: its position's ring row
                    const size_t at = (size_t)r.row(jnew) * kv_dim + koff;
                    kc[at + i0] = knew[i0];
                    kc[at + i1] = knew[i1];
                    vc[at + i0] = vnew[i0];
                    vc[at + i1] = vnew[i1];
                }
            }
        }
        if (has_new) new_j = r.pos - r.lo;
        __syncthreads();
        qhead = qs;
    }

    // This lane's 32 dims of q, rounded to F16 as the CPU twin does (and kept
    // so: 16 registers instead of 32, two blocks an SM).
    __half2 qh[16];
    const float4* qsrc = reinterpret_cast<const float4*>(qhead + sub * 32);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float4 v = qsrc[i];
        qh[2 * i] = __floats2half2_rn(v.x, v.y);
        qh[2 * i + 1] = __floats2half2_rn(v.z, v.w);
    }
    const ScoreMap score = score_map(p.scale, p.softcap, 1.0f);
    float m = -FLT_MAX, l = 0.0f, acc[32];
#pragma unroll
    for (int d = 0; d < 32; d++) acc[d] = 0.0f;
    for (uint32_t jb = jfirst; jb < r.j1; jb += kWarps * KW * U) {  // warp-uniform
        if (jb != jfirst) load_rows(jb, kr, vr);
        // this step's key: Fused, from shared memory (the cache row is this
        // kernel's to write); else from the cache, which the prologue wrote
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (jb + u * KW + g != jnew || jnew >= r.j1) continue;
            if (Fused && new_j == jnew)  // (a branch: the cache loads keep to the global space)
                load_slices(knew + sub * 32, vnew + sub * 32, kr[u], vr[u]);
            else
                load_slices(kbase + (size_t)r.row(jnew) * kv_dim, vbase + (size_t)r.row(jnew) * kv_dim, kr[u],
                            vr[u]);
        }
        float s[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            s[u] = 0.0f;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float kf[8];
                halves8(kr[u][i], kf);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float2 qf = __half22float2(qh[4 * i + e]);
                    s[u] += qf.x * kf[2 * e] + qf.y * kf[2 * e + 1];
                }
            }
#pragma unroll
            for (int o = 1; o < L; o <<= 1) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
            s[u] = score.cap(s[u]);
            s[u] *= score.mul;
        }
        float mnew = m;
#pragma unroll
        for (int u = 0; u < U; u++)
            if (jb + u * KW + g < r.j1) mnew = fmaxf(mnew, s[u]);
        const float corr = expf(m - mnew);
        l *= corr;
#pragma unroll
        for (int d = 0; d < 32; d++) acc[d] *= corr;
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (jb + u * KW + g >= r.j1) continue;
            const float e = expf(s[u] - mnew);
            l += e;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float vf[8];
                halves8(vr[u][i], vf);
#pragma unroll
                for (int x = 0; x < 8; x++) acc[8 * i + x] += e * vf[x];
            }
        }
        m = mnew;
    }
    // The warp's lane groups meet (lanes sub, sub + L, ... hold the same dims).
#pragma unroll
    for (int o = L; o < 32; o <<= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
        const float mn = fmaxf(m, m2), c1 = expf(m - mn), c2 = expf(m2 - mn);
        l = l * c1 + l2 * c2;
#pragma unroll
        for (int d = 0; d < 32; d++) acc[d] = acc[d] * c1 + __shfl_xor_sync(0xffffffffu, acc[d], o) * c2;
        m = mn;
    }
    __shared__ float wm[kWarps], wl[kWarps], wacc[kWarps][HD];
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    if (lane < L) {
#pragma unroll
        for (int d = 0; d < 32; d++) wacc[warp][sub * 32 + d] = acc[d];
    }
    __syncthreads();
    finish_head(p, h, split, r.used, n_splits, wm, wl, &wacc[0][0], HD, out, partials, counters, q8, sinks);
}

// Whether launch takes `p`: a one-token causal pass of head_dim 32, 64, 128
// or 256 (its output can then be rounded to 8 bits as it is written:
// CudaArgs::q8_out).
// (F16 caches: other element types take attention_decode_kv.cuh's kernel)
inline bool takes(const AttentionParams& p) {
    const uint32_t dims_per_lane = p.head_dim / 32;
    return p.k_type == kKvF16 && p.v_type == kKvF16 && p.n_tokens == 1 && p.causal && !p.segmented && !p.n_keys &&
           p.head_dim % 32 == 0 &&
           (dims_per_lane == 1 || dims_per_lane == 2 || dims_per_lane == 4 || dims_per_lane == 8) &&
           p.n_kv_heads != 0 && p.n_heads % p.n_kv_heads == 0;
}

// Whether the lane-group kernel takes `p` (head_dim 32 to 256, 16-byte aligned
// q and caches): the one kernel that can absorb the prologue.
bool groups_kernel_takes(const CudaArgs& a, const AttentionParams& p) {
    const bool aligned = (reinterpret_cast<uintptr_t>(a.buf[0]) | reinterpret_cast<uintptr_t>(a.buf[1]) |
                          reinterpret_cast<uintptr_t>(a.buf[2])) % 16 == 0;
    return takes(p) && aligned &&
           (p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256);
}

template <int HD>
void launch_groups(const CudaArgs& a, const AttentionParams& p, dim3 grid, uint32_t n_splits, float* partials,
                   uint32_t* counters) {
    void (*kernel)(AttentionParams, uint32_t, const float*, uint16_t*, uint16_t*, float*, float*, uint32_t*,
                   const uint32_t*, ActQ8, HeadPrologue, const float*) = attention_decode_groups_kernel<HD, false>;
    HeadPrologue pro{};
    if (a.absorbed.set) {
        kernel = attention_decode_groups_kernel<HD, true>;
        const CudaArgs::Absorbed& qk = a.absorbed;
        pro = HeadPrologue{qk.p<QKRopeKVParams>(), qk.b<float>(1), qk.b<float>(2), qk.b<float>(3), qk.b<float>(4),
                           nullptr};
        if (pro.p.has_freq_factors) pro.factors = qk.b<float>(5);
    }
    launch_pdl(kernel, grid, kWarps * 32, 0, a, p, n_splits, a.b<float>(0), a.b<uint16_t>(1),
               a.b<uint16_t>(2), a.b<float>(3), partials, counters, a.replay_pos, a.q8_out, pro, sinks_of(a, p));
}

// CudaKernelEntry::absorbs for the attention: a one-token decode pass right
// after the qk_norm_rope_kv of the same heads, caches and position does that
// command's work itself (one dependent launch a layer fewer).
inline bool absorbs(const CudaArgs& self, const char* prev, const CudaArgs& prev_args) {
    if (std::string(prev) != "qk_norm_rope_kv" || prev_args.absorbed.set) return false;
    const AttentionParams p = self.p<AttentionParams>();
    const QKRopeKVParams q = prev_args.p<QKRopeKVParams>();
    // the same token, heads and caches; q the prologue's (buffers: see QKRopeKVParams)
    return groups_kernel_takes(self, p) && q.n_tokens == 1 && q.head_dim == p.head_dim && q.n_heads == p.n_heads &&
           q.n_kv_heads == p.n_kv_heads && q.pos0 == p.pos0 && q.max_ctx == p.max_ctx &&
           prev_args.replay_pos == self.replay_pos &&
           prev_args.buf[0] == self.buf[0] && prev_args.buf[6] == self.buf[1] && prev_args.buf[7] == self.buf[2];
}

// The grouped-query kernel for long caches (attention_decode_gqa.cuh).
namespace gqa {
inline bool takes(const CudaArgs& a, const AttentionParams& p);
inline void launch(const CudaArgs& a, const AttentionParams& p);
}  // namespace gqa

// Launches the split kernel and returns true when takes(p); false leaves the
// pass to the other kernels.
inline bool launch(const CudaArgs& a, const AttentionParams& p) {
    // (absorbs said yes only where the lane-group kernel takes p)
    if (a.absorbed.set && !groups_kernel_takes(a, p)) throw Error("attention: cannot do the absorbed prologue's work here");
    if (!takes(p)) return false;
    if (gqa::takes(a, p)) {
        gqa::launch(a, p);
        return true;
    }
    const uint32_t dims_per_lane = p.head_dim / 32;
    // Split count from the cache size and head count (never the position):
    // at most about two blocks an SM (a full cache still fills the GPU; fewer
    // never-used blocks at short positions), halved until the partials fit
    // the workspace after the per-head counters.
    const uint32_t span = p.window ? std::min(p.window, p.max_ctx) : p.max_ctx;
    const uint32_t most = std::clamp<uint32_t>(2u * (uint32_t)a.tuning->sm_count / p.n_heads, 1, kMaxSplits);
    uint32_t n_splits = std::clamp<uint32_t>((span + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, most);
    if ((size_t)p.n_heads * 4 > kWorkspaceCounterBytes) throw Error("CUDA attention: more heads than the split counters hold");
    const size_t partials_at = kWorkspaceCounterBytes;
    auto fits = [&](uint32_t s) { return partials_at + (size_t)p.n_heads * s * (p.head_dim + 2) * 4 <= a.workspace_bytes; };
    while (n_splits > 1 && !fits(n_splits)) n_splits /= 2;
    uint32_t* counters = reinterpret_cast<uint32_t*>(a.workspace);
    float* partials = reinterpret_cast<float*>(a.workspace + partials_at);
    const dim3 grid(p.n_heads, n_splits);
    if (groups_kernel_takes(a, p)) {
        switch (p.head_dim) {
            case 32: launch_groups<32>(a, p, grid, n_splits, partials, counters); return true;
            case 64: launch_groups<64>(a, p, grid, n_splits, partials, counters); return true;
            case 128: launch_groups<128>(a, p, grid, n_splits, partials, counters); return true;
            default: launch_groups<256>(a, p, grid, n_splits, partials, counters); return true;
        }
    }
    const float* q = a.b<float>(0);
    const uint16_t* kc = a.b<uint16_t>(1);
    const uint16_t* vc = a.b<uint16_t>(2);
    float* out = a.b<float>(3);
    const float* sinks = sinks_of(a, p);
    switch (dims_per_lane) {
        case 1: launch_pdl(attention_decode_kernel<1>, grid, kWarps * 32, 0, a, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos, a.q8_out, sinks); break;
        case 2: launch_pdl(attention_decode_kernel<2>, grid, kWarps * 32, 0, a, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos, a.q8_out, sinks); break;
        case 4: launch_pdl(attention_decode_kernel<4>, grid, kWarps * 32, 0, a, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos, a.q8_out, sinks); break;
        case 8: launch_pdl(attention_decode_kernel<8>, grid, kWarps * 32, 0, a, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos, a.q8_out, sinks); break;
        default: return false;
    }
    return true;
}

}  // namespace attention_decode
}  // namespace akunu

#include "attention_decode_gqa.cuh"
