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
// B fragments read transposed by ldmatrix. Rows are normalized at the end.
//
// Meaning (the CPU twin, backend/cpu/kernels/attention.cpp): Q rounded to F16,
// scores in F32 times `scale`, softmax weights rounded to F16, F32 sums. Here
// the unnormalized weights exp(s - running max) are rounded instead (the
// same one F16 rounding, relative 2^-11, before the division by the row sum).
//
// Included once, by attention.cu (attention_prefill::launch).
#pragma once
#include <cfloat>

#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "async_copy.cuh"
#include "kv_cache.cuh"
#include "mma.cuh"

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

// kAsync: both caches F16, tiles copied by cp.async two deep; otherwise one
// tile, loaded and converted through registers.
template <int D, int KV, bool kAsync>
__global__ void __launch_bounds__(kWarps * 32, D == 256 ? 1 : 3)
    attention_prefill_kernel(AttentionParams p, const float* __restrict__ q, const uint8_t* __restrict__ kc,
                             const uint8_t* __restrict__ vc, float* __restrict__ out) {
    constexpr int kLd = D + 8;  // halves per shared row
    extern __shared__ __align__(16) uint16_t tiles[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int h = blockIdx.y, kvh = h / (int)(p.n_heads / p.n_kv_heads);
    const int n = (int)p.n_tokens, pos0 = (int)p.pos0, window = (int)p.window;
    const uint32_t kv_dim = p.n_kv_heads * D;
    const size_t krow = kv_row_bytes(p.k_type, kv_dim), vrow = kv_row_bytes(p.v_type, kv_dim);
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
    const int block_last = p.causal ? pos0 + min(q0 + kQueries, n) - 1 : pos0 + n - 1;
    const int block_first = window ? max(0, pos0 + q0 + 1 - window) : 0;

    // Q as A fragments for the D / 16 k-steps (rows past the pass read the last one, never written).
    uint32_t qa[D / 16][4];
    {
        const float* qr[2];
#pragma unroll
        for (int r = 0; r < 2; r++) qr[r] = q + (size_t)min(row[r], n - 1) * p.q_stride + (size_t)h * D;
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

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    // Stage the K and V rows of keys kb..kb+KV-1 into tile pair `stage`;
    // zeros outside the keys the block sees (rows past the pass or below its
    // windows may hold anything: never written, or on a ring another
    // position's, and 0 x NaN would poison the products). Key kf + j is at
    // ring row ring_add(kf_row, j): the block's keys are no more than the
    // cache's rows (launch_attention checks), so one division a tile at most.
    auto stage_tile = [&](int kb, int stage) {
        uint16_t* ks = tiles + stage * 2 * KV * kLd;
        uint16_t* vs = ks + KV * kLd;
        const int kf = max(kb, block_first);
        const uint32_t kf_row = kv_ring_row((uint32_t)kf, p.max_ctx);
        for (int i = tid; i < KV * D / 8; i += kWarps * 32) {
            const int r = i / (D / 8), c = i % (D / 8), key = kb + r;
            const bool valid = key >= kf && key <= block_last;
            const size_t row = kv_cache::ring_add(kf_row, (uint32_t)(key - kf), p.max_ctx);
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

    // Tiles every row of the block sees whole need no mask: keys at or below
    // the first row's last key (causal) or the pass's last (encoders), and at
    // or above the last row's window start.
    const int diagonal = p.causal ? pos0 + q0 : pos0 + n - 1;
    const int window_lo = window ? pos0 + q0 + kQueries - window : 0;
    const float scale = p.scale * 1.4426950408889634f;  // log2 e: exp2 below

    const int kb0 = block_first / KV * KV;
    if (kAsync) {
        stage_tile(kb0, 0);
        copy_commit();
    }
    int stage = 0;
    for (int kb = kb0; kb <= block_last; kb += KV) {
        if (kAsync) {
            if (kb + KV <= block_last) stage_tile(kb + KV, stage ^ 1);
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
#pragma unroll
        for (int d16 = 0; d16 < D / 16; d16++)
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt++) {
                const uint16_t* kr = ks + (nt * 8 + g) * kLd + 16 * d16 + 2 * t;
                mma_16816(s[nt], qa[d16], *reinterpret_cast<const uint32_t*>(kr),
                          *reinterpret_cast<const uint32_t*>(kr + 8));
            }

        // Mask and scale (base 2); online softmax per row (a row's values live in the 4 lanes of a quad).
        float mx[2] = {-INFINITY, -INFINITY};
        if (kb + KV - 1 > diagonal || kb < window_lo) {
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int r = c / 2, key = kb + nt * 8 + 2 * t + (c & 1);
                    const bool seen = key <= last[r] && (window == 0 || key + window > pos[r]);
                    s[nt][c] = seen ? s[nt][c] * scale : -INFINITY;
                    mx[r] = fmaxf(mx[r], s[nt][c]);
                }
        } else {
#pragma unroll
            for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    s[nt][c] *= scale;
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
            alpha[r] = exp2f(m[r] - ref[r]);
            m[r] = mn;
        }
#pragma unroll
        for (int nt = 0; nt < KV / 8; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                s[nt][c] = exp2f(s[nt][c] - ref[c / 2]);
                sum[c / 2] += s[nt][c];
            }
#pragma unroll
        for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + sum[r];  // per-lane partial sums
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            o[i][0] *= alpha[0];
            o[i][1] *= alpha[0];
            o[i][2] *= alpha[1];
            o[i][3] *= alpha[1];
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

#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(kFull, l[r], 1);
        l[r] += __shfl_xor_sync(kFull, l[r], 2);
        if (row[r] >= n) continue;
        const float inv = 1.0f / l[r];
        float* orow = out + (size_t)row[r] * p.out_stride + (size_t)h * D;
#pragma unroll
        for (int i = 0; i < D / 8; i++)
            *reinterpret_cast<float2*>(orow + 8 * i + 2 * t) = make_float2(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
    }
}

// Launches the tensor-core kernel and returns true when `p` is a many-token
// pass it handles (causal or not, sliding window, GQA; head_dim 64, 128 or
// 256; not segmented, not cross-attention); false leaves it to the general kernel.
inline bool takes(const CudaArgs& a, const AttentionParams& p) {
    if (p.n_tokens < 2 || p.segmented || p.n_keys || a.replay_pos) return false;
    if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads) return false;
    if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return false;
    // float2 Q reads and output writes, 16-byte K / V rows
    if (p.q_stride % 2 || p.out_stride % 2 || (reinterpret_cast<uintptr_t>(a.buf[0]) | reinterpret_cast<uintptr_t>(a.buf[3])) % 8)
        return false;
    return (reinterpret_cast<uintptr_t>(a.buf[1]) | reinterpret_cast<uintptr_t>(a.buf[2])) % 16 == 0 &&
           (p.n_kv_heads * p.head_dim) % 8 == 0;
}

template <int D, int KV, bool kAsync>
void launch_as(const CudaArgs& a, const AttentionParams& p) {
    constexpr size_t shared = shared_bytes<D, KV, kAsync>();
    static bool configured = false;  // above 48 KB a kernel must ask for its shared memory
    if (!configured) {
        cudaFuncSetAttribute(attention_prefill_kernel<D, KV, kAsync>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)shared);
        configured = true;
    }
    const dim3 grid(blocks_for(p.n_tokens, kQueries), p.n_heads);
    attention_prefill_kernel<D, KV, kAsync><<<grid, kWarps * 32, shared, a.stream>>>(
        p, a.b<float>(0), a.b<uint8_t>(1), a.b<uint8_t>(2), a.b<float>(3));
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
        case 64: launch_head_dim<64, 64>(a, p); return true;
        case 128: launch_head_dim<128, 64>(a, p); return true;
        case 256: launch_head_dim<256, 32>(a, p); return true;
        default: return false;
    }
}

}  // namespace attention_prefill
}  // namespace akunu
