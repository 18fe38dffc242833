// Flash attention for prefill passes (many query tokens) on the tensor cores.
//
// A block takes 64 queries of one head; each of its 4 warps owns 16 query
// rows. The block walks the key range its queries need in tiles of KV keys:
// the K and V rows are staged in shared memory (F16 caches: by cp.async, the
// next tile's loads in flight while the warps work on this one; other types,
// core/kv_layout.h, converted to F16 as they are staged), the warp
// computes its 16 x KV scores with m16n8k16 products (Q rounded to F16, kept
// in registers as A fragments), masks and scales them, and keeps an online
// softmax per row in registers (the accumulator layout is known: mma.cuh;
// exponentials base 2, the scale carrying log2 e; tiles that every row sees
// whole skip the mask);
// the exponentials, rounded to F16, are the A fragments of O += P V, with V's
// B fragments read transposed by ldmatrix. Rows are normalized at the end,
// where a head's attention sink (AttentionParams::sinks) joins their softmax.
//
// Meaning (the CPU twin, backend/cpu/kernels/attention.cpp): Q rounded to F16,
// scores in F32 times `scale`, softmax weights rounded to F16, F32 sums. Here
// the unnormalized weights exp(s - running max) are rounded instead (the
// same one F16 rounding, relative 2^-11, before the division by the row sum).
//
// The walk over the keys (flash_walk) is shared by the contiguous cache's
// kernel and the paged pool's (continuous batching: prompt rows of several
// sequences in one pass, keys through each sequence's block table). A row's
// result depends only on its own keys, walked in tiles at fixed multiples of
// KV from key 0, whatever other rows share its block: a tile a row does not
// see leaves its sums exactly as they were (batch invariance).
//
// Included once, by attention.cu (attention_prefill::launch, launch_paged).
#pragma once
#include <algorithm>
#include <cfloat>
#include <climits>

#include "core/kernel_params.h"
#include "device_math.cuh"
#include "cuda_kernel.h"
#include "async_copy.cuh"
#include "kv_cache.cuh"
#include "mma.cuh"
#include "paged_pool.cuh"

namespace akunu {
namespace attention_prefill {

constexpr int kWarps = 4;
constexpr int kQueries = 16 * kWarps;
constexpr unsigned kFull = 0xffffffffu;

// Shared memory of a block: kStages (K, V) tile pairs of KV rows of D + 8 halves
// (the padding keeps fragment reads and ldmatrix rows free of bank conflicts).
template <int D, int KV, bool kAsync>
constexpr size_t shared_bytes() {
    return (size_t)(kAsync ? 2 : 1) * 2 * KV * (D + 8) * sizeof(uint16_t);
}

// Where the keys of a walk live. Ring: the contiguous cache, key j at row
// kv_ring_row(j, rows) (one division a tile at most: a tile's keys are no
// more than the cache's rows, which launch_attention checks). Paged: a
// sequence's block table.
struct RingKeys {
    uint32_t rows;
    __device__ __forceinline__ size_t first_row(int kf) const { return kv_ring_row((uint32_t)kf, rows); }
    __device__ __forceinline__ size_t row(size_t kf_row, int kf, int key, bool) const {
        return kv_cache::ring_add((uint32_t)kf_row, (uint32_t)(key - kf), rows);
    }
};

struct PagedKeys {
    const int32_t* table;
    uint32_t block_size;
    __device__ __forceinline__ size_t first_row(int) const { return 0; }
    __device__ __forceinline__ size_t row(size_t, int, int key, bool valid) const {
        return valid ? pool_row(table, block_size, (uint32_t)key) : 0;  // (a table holds the sequence's blocks only)
    }
};

// One warp's 16 query rows (this lane's two: r = 0, 1) walk keys [first, last]
// of KV head kvh in tiles of KV keys, keeping the online softmax (m, l, o).
// seen(r, key): whether row r sees the key. Tiles inside [whole_lo, whole_hi]
// are seen whole by every row of the block and skip the mask. Every thread of
// the block calls it with the same keys (it synchronizes the block).
template <int D, int KV, bool kAsync, class Keys, class Seen>
__device__ __forceinline__ void flash_walk(const Keys& keys, const Seen& seen, const AttentionParams& p,
                                           const uint8_t* __restrict__ kc, const uint8_t* __restrict__ vc, int kvh,
                                           int first, int last, int whole_lo, int whole_hi,
                                           const uint32_t (&qa)[D / 16][4], float (&o)[D / 8][4], float (&m)[2],
                                           float (&l)[2], uint16_t* tiles) {
    constexpr int kLd = D + 8;  // halves per shared row
    const int tid = threadIdx.x, lane = tid % 32, t = lane % 4;
    const uint32_t kv_dim = p.n_kv_heads * D;
    const size_t krow = kv_row_bytes(p.k_type, kv_dim), vrow = kv_row_bytes(p.v_type, kv_dim);

    // Stage the K and V rows of keys kb..kb+KV-1 into tile pair `stage`;
    // zeros outside [first, last] (rows there may hold anything: never
    // written, another position's on a ring, another sequence's in a pool,
    // and 0 x NaN would poison the products).
    auto stage_tile = [&](int kb, int stage) {
        uint16_t* ks = tiles + stage * 2 * KV * kLd;
        uint16_t* vs = ks + KV * kLd;
        const int kf = max(kb, first);
        const size_t kf_row = keys.first_row(kf);
        for (int i = tid; i < KV * D / 8; i += kWarps * 32) {
            const int r = i / (D / 8), c = i % (D / 8), key = kb + r;
            const bool valid = key >= kf && key <= last;
            const size_t row = keys.row(kf_row, kf, key, valid);
            const uint32_t at = (uint32_t)kvh * D + 8 * c;
            if (kAsync) {
                copy16_async(ks + r * kLd + 8 * c, valid ? kc + row * krow + 2 * at : kc, valid);
                copy16_async(vs + r * kLd + 8 * c, valid ? vc + row * vrow + 2 * at : vc, valid);
            } else {
                uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
                if (valid) {
                    kv = kv_cache::load8_f16(p.k_type, kc + row * krow, kv_dim, at);
                    vv = kv_cache::load8_f16(p.v_type, vc + row * vrow, kv_dim, at);
                }
                *reinterpret_cast<uint4*>(ks + r * kLd + 8 * c) = kv;
                *reinterpret_cast<uint4*>(vs + r * kLd + 8 * c) = vv;
            }
        }
    };

    const ScoreMap score = score_map(p.scale, p.softcap, 1.4426950408889634f);  // log2 e: exp2 below
    const float scale = score.mul;
    const int kb0 = first / KV * KV;
    if (kAsync) {
        stage_tile(kb0, 0);
        copy_commit();
    }
    int stage = 0;
    for (int kb = kb0; kb <= last; kb += KV) {
        if (kAsync) {
            if (kb + KV <= last) stage_tile(kb + KV, stage ^ 1);
            copy_commit();  // (an empty group on the last tile keeps the count)
            copy_wait<1>();
            __syncthreads();  // this tile landed for every thread
        } else {
            __syncthreads();  // the previous tile is consumed
            stage_tile(kb, 0);
            __syncthreads();
        }
        const uint16_t* ks = tiles + stage * 2 * KV * kLd;
        const uint16_t* vs = ks + KV * kLd;

        // S = Q K^T for the warp's 16 rows x KV keys (B(k = d, n = key) = K[key][d]).
        float s[KV / 8][4];
#pragma unroll
        for (int nt = 0; nt < KV / 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
// (one ldmatrix gives the B fragments of two key octets: lanes 0..15 address
        // octet nt's rows, 16..31 octet nt + 1's, odd lane octets the upper 8 dims)
#pragma unroll
        for (int d16 = 0; d16 < D / 16; d16++)
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt += 2) {
                uint32_t b[4];
                ldmatrix_x4(b, ks + ((nt + lane / 16) * 8 + lane % 8) * kLd + 16 * d16 + 8 * (lane / 8 % 2));
                mma_16816(s[nt], qa[d16], b[0], b[1]);
                mma_16816(s[nt + 1], qa[d16], b[2], b[3]);
            }

        // Mask and scale (base 2); online softmax per row (a row's values live in the 4 lanes of a quad).
        // The product is rounded on its own in both branches (never fused into exp2's argument),
        // so a row's scores do not depend on whether its block's tile took the mask.
        float mx[2] = {-INFINITY, -INFINITY};
        if (score.out != 0.0f)  // soft-capped scores (scale then 1)
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) s[nt][c] = score.cap(s[nt][c]);
        if (kb + KV - 1 > whole_hi || kb < whole_lo) {
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int r = c / 2, key = kb + nt * 8 + 2 * t + (c & 1);
                    s[nt][c] = seen(r, key) ? __fmul_rn(s[nt][c], scale) : -INFINITY;
                    mx[r] = fmaxf(mx[r], s[nt][c]);
                }
        } else {
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    s[nt][c] = __fmul_rn(s[nt][c], scale);
                    mx[c / 2] = fmaxf(mx[c / 2], s[nt][c]);
                }
        }
        float ref[2], alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFull, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFull, mx[r], 2));
            const float mn = fmaxf(m[r], mx[r]);
            ref[r] = mn == -INFINITY ? 0.0f : mn;  // a row with no key yet: everything stays 0
            alpha[r] = exp2_ftz(m[r] - ref[r]);
            m[r] = mn;
        }
#pragma unroll
        for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                s[nt][c] = exp2_ftz(s[nt][c] - ref[c / 2]);
                sum[c / 2] += s[nt][c];
            }
#pragma unroll
        for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + sum[r];  // per-lane partial sums
        // (deep in the keys a tile seldom raises a row's maximum: the warp
        // skips the rescale, a multiplication by exactly 1, when none does)
        if (__any_sync(kFull, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int i = 0; i < D / 8; i++) {
                o[i][0] *= alpha[0];
                o[i][1] *= alpha[0];
                o[i][2] *= alpha[1];
                o[i][3] *= alpha[1];
            }
        }

        // O += P V: the score accumulators of two key octets form one A fragment.
#pragma unroll
        for (int kk = 0; kk < KV / 16; kk++) {
            const uint32_t pa[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                    pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int nt = 0; nt < D / 8; nt += 2) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, vs + (16 * kk + lane % 16) * kLd + (nt + lane / 16) * 8);
                mma_16816(o[nt], pa, b[0], b[1]);
                mma_16816(o[nt + 1], pa, b[2], b[3]);
            }
        }
        if (kAsync) {
            __syncthreads();  // this tile pair is consumed: the next iteration's copies may refill it
            stage ^= 1;
        }
    }
}

// Q rows (two a lane: the warp's rows g and g + 8) as A fragments for the D / 16 k-steps.
template <int D>
__device__ __forceinline__ void load_q(const float* const (&qr)[2], uint32_t (&qa)[D / 16][4]) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int s = 0; s < D / 16; s++)
#pragma unroll
        for (int half = 0; half < 2; half++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float2 v = *reinterpret_cast<const float2*>(qr[r] + 16 * s + 8 * half + 2 * t);
                qa[s][2 * half + r] = pack_half2(v.x, v.y);
            }
}

// The two rows' normalized outputs (orow[r] null: a row past the pass), with
// head h's sink joined to each row's softmax (sinks: the heads' logits,
// AttentionParams::sinks; nullptr: none). m: the rows' maxima (base 2).
template <int D>
__device__ __forceinline__ void store_rows(float* const (&orow)[2], const float (&o)[D / 8][4], const float (&m)[2],
                                           float (&l)[2], const float* sinks, int h) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(kFull, l[r], 1);
        l[r] += __shfl_xor_sync(kFull, l[r], 2);
        if (!orow[r]) continue;
        const float c = sink_factor<true>(sinks, (uint32_t)h, m[r], l[r]);
        const float inv = c / l[r];
#pragma unroll
        for (int i = 0; i < D / 8; i++)
            *reinterpret_cast<float2*>(orow[r] + 8 * i + 2 * t) = make_float2(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
    }
}

// A pass whose (query tile, head) blocks leave SMs idle splits each block's
// keys: split z of n walks its share of the block's key tiles (whole tiles,
// so every tile keeps its place from key 0) and writes a record per row and
// head, (unnormalized output, running max, sum), to `partials`
// ([z][row][head][D + 2] floats); combine_kernel merges a row's records in
// ascending z. A split with no keys of a row leaves (0, -inf, 0).
struct KeySplit {
    float* partials = nullptr;
    int n = 1;
};

// The two rows' records of split z (orow[r] null: a row past the pass).
template <int D>
__device__ __forceinline__ void store_records(float* const (&rec)[2], const float (&o)[D / 8][4], const float (&m)[2],
                                              float (&l)[2]) {
    const int t = threadIdx.x % 4;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(kFull, l[r], 1);
        l[r] += __shfl_xor_sync(kFull, l[r], 2);
        if (!rec[r]) continue;
#pragma unroll
        for (int i = 0; i < D / 8; i++)
            *reinterpret_cast<float2*>(rec[r] + 8 * i + 2 * t) = make_float2(o[i][2 * r], o[i][2 * r + 1]);
        if (t == 0) *reinterpret_cast<float2*>(rec[r] + D) = make_float2(m[r], l[r]);
    }
}

// out[row, head] from the n records of a row and head: one block a (row,
// head), thread d its output dimension; the maxima are base-2 (the walk's
// scale carries log2 e). The head's sink (sinks, or nullptr) joins here, once
// the records are combined.
template <int D>
__global__ void __launch_bounds__(D) combine_kernel(AttentionParams p, int n, const float* __restrict__ partials,
                                                    float* __restrict__ out, const float* __restrict__ sinks) {
    const int row = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    const size_t stride = (size_t)p.n_tokens * p.n_heads * (D + 2);
    const float* rec = partials + ((size_t)row * p.n_heads + h) * (D + 2);
    float mx = -INFINITY;
    for (int z = 0; z < n; z++) mx = fmaxf(mx, rec[z * stride + D]);
    float sum = 0.0f, acc = 0.0f;
    for (int z = 0; z < n; z++) {
        const float* r = rec + z * stride;
        const float w = exp2f(r[D] - mx);  // (a split without keys: -inf, weight 0)
        sum += w * r[D + 1];
        acc += w * r[d];
    }
    const float c = sink_factor<true>(sinks, (uint32_t)h, mx, sum);
    out[(size_t)row * p.out_stride + (size_t)h * D + d] = acc * c / sum;
}

// kAsync: both caches F16, tiles copied by cp.async two deep; otherwise one
// tile, loaded and converted through registers. Grid (query tiles, heads,
// key splits). sinks: the heads' sink logits (AttentionParams::sinks), joined
// as the rows are stored (with key splits, in combine_kernel); nullptr: none.
template <int D, int KV, bool kAsync>
__global__ void __launch_bounds__(kWarps * 32, D == 256 ? 1 : 3)
    attention_prefill_kernel(AttentionParams p, const float* __restrict__ q, const uint8_t* __restrict__ kc,
                             const uint8_t* __restrict__ vc, float* __restrict__ out, const int32_t* __restrict__ seg,
                             KeySplit split, const float* __restrict__ sinks) {
    extern __shared__ __align__(16) uint16_t tiles[];
    const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4;
    const int h = blockIdx.y, kvh = h / (int)(p.n_heads / p.n_kv_heads);
    const int n = (int)p.n_tokens, pos0 = (int)p.pos0, window = (int)p.window;
    const int q0 = blockIdx.x * kQueries;

    // This lane's two query rows (g and g + 8 of the warp's 16), their
    // positions and the last key each sees (encoders: the whole pass).
    int row[2], pos[2], last[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        row[r] = q0 + warp * 16 + g + 8 * r;
        pos[r] = pos0 + row[r];
        last[r] = p.causal ? pos[r] : pos0 + n - 1;
    }
    int block_last = p.causal ? pos0 + min(q0 + kQueries, n) - 1 : pos0 + n - 1;
    int block_first = window ? max(0, pos0 + q0 + 1 - window) : 0;
    // Tiles every row of the block sees whole need no mask: keys at or below
    // the first row's last key (causal) or the pass's last (encoders), and at
    // or above the last row's window start.
    int diagonal = p.causal ? pos0 + q0 : pos0 + n - 1;
    int window_lo = window ? pos0 + q0 + kQueries - window : 0;
    // Packed sequences (segmented encoder passes): row r sees keys [lo, last]
    // of its own sequence only, whatever the causal flag and window say (the
    // CPU twin's meaning); the block walks the union of its rows' ranges and
    // skips the mask inside their intersection.
    int lo[2] = {0, 0};
    if (seg) {
        __shared__ int range[4];  // min first, max last, max first, min last over the block's rows
        if (threadIdx.x == 0) range[0] = range[3] = INT_MAX, range[1] = range[2] = INT_MIN;
        __syncthreads();
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int sr = min(row[r], n - 1);
            lo[r] = seg[2 * sr];
            last[r] = seg[2 * sr + 1] - 1;
            if (row[r] < n) {
                atomicMin(&range[0], lo[r]);
                atomicMax(&range[1], last[r]);
                atomicMax(&range[2], lo[r]);
                atomicMin(&range[3], last[r]);
            }
        }
        __syncthreads();
        block_first = range[0], block_last = range[1], window_lo = range[2], diagonal = range[3];
    }

    // (rows past the pass read the last one, never written)
    uint32_t qa[D / 16][4];
    const float* qr[2] = {q + (size_t)min(row[0], n - 1) * p.q_stride + (size_t)h * D,
                          q + (size_t)min(row[1], n - 1) * p.q_stride + (size_t)h * D};
    load_q<D>(qr, qa);

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    auto seen = [&](int r, int key) {
        return key <= last[r] && (seg ? key >= lo[r] : (window == 0 || key + window > pos[r]));
    };
    // this split's share of the block's key tiles
    int first = block_first, final_key = block_last;
    if (split.n > 1) {
        const int t0 = block_first / KV, per = (block_last / KV - t0 + split.n) / split.n;
        first = max(block_first, (t0 + per * (int)blockIdx.z) * KV);
        final_key = min(block_last, (t0 + per * ((int)blockIdx.z + 1)) * KV - 1);
    }
    if (first <= final_key)  // (the same for every thread of the block)
        flash_walk<D, KV, kAsync>(RingKeys{p.max_ctx}, seen, p, kc, vc, kvh, first, final_key, window_lo, diagonal,
                                  qa, o, m, l, tiles);

    float* orow[2];
    if (split.n > 1) {
        const size_t at = (size_t)blockIdx.z * n;
#pragma unroll
        for (int r = 0; r < 2; r++)
            orow[r] = row[r] < n ? split.partials + ((at + row[r]) * p.n_heads + h) * (D + 2) : nullptr;
        store_records<D>(orow, o, m, l);
        return;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) orow[r] = row[r] < n ? out + (size_t)row[r] * p.out_stride + (size_t)h * D : nullptr;
    store_rows<D>(orow, o, m, l, sinks, h);
}

// Prompt rows of a paged pass (continuous batching): row t of the pass is
// sequence rows[2t] at position rows[2t + 1], causal, its keys in the pool
// through the sequence's block table. A block takes 64 consecutive rows of
// the pass and walks once for each run of rows of one sequence among them
// (a chunk of a prompt is one run; a block where chunks meet walks twice or
// more), each row seeing only its own sequence's keys. sinks: the heads' sink
// logits (PagedAttentionParams::sinks), joined as the rows are stored; nullptr: none.
template <int D, int KV, bool kAsync>
__global__ void __launch_bounds__(kWarps * 32, D == 256 ? 1 : 3)
    attention_paged_prefill_kernel(PagedAttentionParams pp, const float* __restrict__ q, const uint8_t* __restrict__ kc,
                                   const uint8_t* __restrict__ vc, float* __restrict__ out,
                                   const int32_t* __restrict__ rows, const int32_t* __restrict__ tables,
                                   const float* __restrict__ sinks) {
    extern __shared__ __align__(16) uint16_t tiles[];
    __shared__ int seq_of[kQueries], pos_of[kQueries];
    const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4;
    const int h = blockIdx.y, kvh = h / (int)(pp.n_heads / pp.n_kv_heads);
    const int n = (int)pp.n_tokens, window = (int)pp.window;
    const int q0 = blockIdx.x * kQueries, in_block = min(kQueries, n - q0);
    for (int i = threadIdx.x; i < kQueries; i += kWarps * 32) {
        seq_of[i] = i < in_block ? rows[2 * (size_t)(q0 + i)] : -1;
        pos_of[i] = i < in_block ? rows[2 * (size_t)(q0 + i) + 1] : 0;
    }
    __syncthreads();

    int at[2], row[2], pos[2];  // this lane's two rows: in the block, in the pass, their positions
#pragma unroll
    for (int r = 0; r < 2; r++) {
        at[r] = warp * 16 + g + 8 * r;
        row[r] = q0 + at[r];
        pos[r] = pos_of[at[r]];
    }
    uint32_t qa[D / 16][4];
    const float* qr[2] = {q + (size_t)min(row[0], n - 1) * pp.q_stride + (size_t)h * D,
                          q + (size_t)min(row[1], n - 1) * pp.q_stride + (size_t)h * D};
    load_q<D>(qr, qa);

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    // The walk reads what the contiguous kernel reads of AttentionParams.
    AttentionParams p{};
    p.n_heads = pp.n_heads;
    p.n_kv_heads = pp.n_kv_heads;
    p.scale = pp.scale;
    p.softcap = pp.softcap;
    p.k_type = pp.k_type;
    p.v_type = pp.v_type;
    for (int r0 = 0; r0 < in_block;) {  // runs of one sequence (the same for every thread)
        const int s = seq_of[r0];
        int r1 = r0, lo = pos_of[r0], hi = pos_of[r0];
        while (r1 + 1 < in_block && seq_of[r1 + 1] == s) {
            r1++;
            lo = min(lo, pos_of[r1]);
            hi = max(hi, pos_of[r1]);
        }
        const int first = window ? max(0, lo + 1 - window) : 0;
        // the run is the whole block: tiles below its lowest row's last key and
        // above its highest row's window start need no mask
        const bool whole = r0 == 0 && r1 == kQueries - 1;
        const int whole_hi = whole ? lo : -1;
        const int whole_lo = window ? hi + 1 - window : 0;
        // (by place in the block, not by sequence: a sequence may have two runs in one block)
        auto seen = [&](int r, int key) {
            return at[r] >= r0 && at[r] <= r1 && key <= pos[r] && (window == 0 || key + window > pos[r]);
        };
        flash_walk<D, KV, kAsync>(PagedKeys{tables + (size_t)s * pp.max_blocks, pp.block_size}, seen, p, kc, vc,
                                  kvh, first, hi, whole_lo, whole_hi, qa, o, m, l, tiles);
        r0 = r1 + 1;
    }

    float* orow[2];
#pragma unroll
    for (int r = 0; r < 2; r++)
        orow[r] = row[r] < n ? out + (size_t)row[r] * pp.out_stride + (size_t)h * D : nullptr;
    store_rows<D>(orow, o, m, l, sinks, h);
}

// Launches the tensor-core kernel and returns true when `p` is a many-token
// pass it handles (causal or not, sliding window, GQA, packed sequences;
// head_dim 32, 64, 128 or 256; not cross-attention); false leaves it to the
// general kernel.
inline bool takes(const CudaArgs& a, const AttentionParams& p) {
    if (p.n_tokens < 2 || p.n_keys || a.replay_pos || (p.segmented && !a.buf[4])) return false;
    if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads) return false;
    if (p.head_dim != 32 && p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return false;
    // float2 Q reads and output writes, 16-byte K / V rows
    if (p.q_stride % 2 || p.out_stride % 2 || (reinterpret_cast<uintptr_t>(a.buf[0]) | reinterpret_cast<uintptr_t>(a.buf[3])) % 8)
        return false;
    return (reinterpret_cast<uintptr_t>(a.buf[1]) | reinterpret_cast<uintptr_t>(a.buf[2])) % 16 == 0 &&
           (p.n_kv_heads * p.head_dim) % 8 == 0;
}

constexpr uint32_t kMaxKeySplits = 4;
constexpr uint32_t kMinSplitTiles = 32;  // key tiles a split walks at least (shallower, the combine costs more than it gains)

// Key splits of a pass of `blocks` (query tile, head) blocks, `per_sm` of
// which fit an SM: the count (up to kMaxKeySplits, each split kMinSplitTiles
// of the fewest keys a block walks, the records within the workspace) that
// takes the fewest rounds of whole waves per unit of work, ties to fewer
// (a pass of few query tiles over a deep cache fills a fraction of one wave
// unsplit). AKUNU_CUDA_TUNING prefill_splits=N forces N (within the
// workspace). From the pass's shape, the cache depth and the GPU alone.
inline uint32_t key_splits(const CudaArgs& a, const AttentionParams& p, unsigned blocks, int per_sm, int kv) {
    const size_t record = (size_t)p.n_tokens * p.n_heads * (p.head_dim + 2) * sizeof(float);
    const size_t fit = a.workspace && a.workspace_bytes > kWorkspaceCounterBytes
                           ? (a.workspace_bytes - kWorkspaceCounterBytes) / record
                           : 0;
    const uint32_t forced = a.tuning ? a.tuning->prefill_splits : 0;
    if (forced) return (uint32_t)std::max<size_t>(1, std::min<size_t>(forced, fit));
    const uint32_t keys = p.window ? std::min(p.pos0 + 1, p.window) : p.pos0 + 1;
    const size_t slots = (size_t)std::max(1, a.tuning ? a.tuning->sm_count : 132) * std::max(1, per_sm);
    uint32_t best = 1;
    double best_cost = (double)((blocks + slots - 1) / slots);
    for (uint32_t s = 2; s <= kMaxKeySplits && s <= fit && keys / (uint32_t)kv >= kMinSplitTiles * s; s++) {
        const double cost = (double)((blocks * s + slots - 1) / slots) / s;
        if (cost < best_cost - 1e-9) best = s, best_cost = cost;
    }
    return best;
}

template <int D, int KV, bool kAsync>
void launch_as(const CudaArgs& a, const AttentionParams& p) {
    constexpr size_t shared = shared_bytes<D, KV, kAsync>();
    const auto kernel = attention_prefill_kernel<D, KV, kAsync>;
    allow_dynamic_shared((const void*)kernel, (int)shared);
    static const int per_sm = [&] {
        int n = 0;
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, shared) == cudaSuccess ? n : 1;
    }();
    const unsigned tiles = blocks_for(p.n_tokens, kQueries);
    KeySplit split;
    split.n = (int)key_splits(a, p, tiles * p.n_heads, per_sm, KV);
    if (split.n > 1) split.partials = reinterpret_cast<float*>(a.workspace + kWorkspaceCounterBytes);
    const float* sinks = p.sinks ? a.b<float>(7) : nullptr;  // AttentionParams::sinks
    kernel<<<dim3(tiles, p.n_heads, split.n), kWarps * 32, shared, a.stream>>>(
        p, a.b<float>(0), a.b<uint8_t>(1), a.b<uint8_t>(2), a.b<float>(3), p.segmented ? a.b<int32_t>(4) : nullptr,
        split, sinks);
    if (split.n > 1)
        combine_kernel<D><<<dim3(p.n_tokens, p.n_heads), D, 0, a.stream>>>(p, split.n, split.partials, a.b<float>(3),
                                                                           sinks);
}

template <int D, int KV>
void launch_head_dim(const CudaArgs& a, const AttentionParams& p) {
    if (p.k_type == kKvF16 && p.v_type == kKvF16 && (!a.tuning || a.tuning->prefill_async))
        launch_as<D, KV, true>(a, p);
    else
        launch_as<D, KV, false>(a, p);
}

inline bool launch(const CudaArgs& a, const AttentionParams& p) {
    if (!takes(a, p)) return false;
    switch (p.head_dim) {
        case 32: launch_head_dim<32, 64>(a, p); return true;
        case 64: launch_head_dim<64, 64>(a, p); return true;
        case 128: launch_head_dim<128, 64>(a, p); return true;
        case 256: launch_head_dim<256, 32>(a, p); return true;
        default: return false;
    }
}

template <int D, int KV, bool kAsync>
void launch_paged_as(const CudaArgs& a, const PagedAttentionParams& p, uint32_t first) {
    constexpr size_t shared = shared_bytes<D, KV, kAsync>();
    allow_dynamic_shared((const void*)attention_paged_prefill_kernel<D, KV, kAsync>, (int)shared);
    PagedAttentionParams rest = p;
    rest.n_tokens = p.n_tokens - first;
    const dim3 grid(blocks_for(rest.n_tokens, kQueries), p.n_heads);
    attention_paged_prefill_kernel<D, KV, kAsync><<<grid, kWarps * 32, shared, a.stream>>>(
        rest, a.b<float>(0) + (size_t)first * p.q_stride, a.b<uint8_t>(1), a.b<uint8_t>(2),
        a.b<float>(3) + (size_t)first * p.out_stride, a.b<int32_t>(4) + 2 * (size_t)first, a.b<int32_t>(5),
        p.sinks ? (const float*)a.b<float>(6) : nullptr);  // PagedAttentionParams::sinks
}

// Rows [first, n_tokens) of a paged pass (its prompt rows) on the tensor
// cores; false leaves them to the per-row kernel. What decides is the model's
// shapes and the buffers, never the pass, so a row's kernel does not depend
// on the rows around it.
inline bool launch_paged(const CudaArgs& a, const PagedAttentionParams& p, uint32_t first) {
    if (a.tuning && !a.tuning->paged_prefill_tc) return false;
    // F16 pools; quantized ones (converted as staged, as the contiguous kernel
    // does) keep the per-row kernel until this path is checked against them
    if (p.k_type != kKvF16 || p.v_type != kKvF16) return false;
    if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads) return false;
    if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return false;
    if (p.q_stride % 2 || p.out_stride % 2 ||
        (reinterpret_cast<uintptr_t>(a.buf[0]) | reinterpret_cast<uintptr_t>(a.buf[3])) % 8)
        return false;
    if ((reinterpret_cast<uintptr_t>(a.buf[1]) | reinterpret_cast<uintptr_t>(a.buf[2])) % 16 ||
        (p.n_kv_heads * p.head_dim) % 8)
        return false;
    if (first >= p.n_tokens) return true;
    const bool async = !a.tuning || a.tuning->prefill_async;
    switch (p.head_dim) {
        case 64: async ? launch_paged_as<64, 64, true>(a, p, first) : launch_paged_as<64, 64, false>(a, p, first); break;
        case 128:
            async ? launch_paged_as<128, 64, true>(a, p, first) : launch_paged_as<128, 64, false>(a, p, first);
            break;
        default:
            async ? launch_paged_as<256, 32, true>(a, p, first) : launch_paged_as<256, 32, false>(a, p, first);
            break;
    }
    return true;
}

}  // namespace attention_prefill
}  // namespace akunu
