// Row-side tensor-core GEMM over K-quant weights decoded to F16 in registers:
// the decode rows of batch tables in engines of more than kBatchRowsMax
// sequences (in every engine with rows_kq=2), y[t, n] = sum_k W[n, k] x[t, k]
// (+ bias[n]), for Q4_K and Q6_K in its regrouped Q6_K_X8 layout (the
// tensors of the Q4_K_M mix).
//
// At 17-64 rows the integer kernel (gemm_rows_q8.cuh) would scale every product's
// four sums by its own weight and activation scales (a Q4_K scale covers 32
// values: one m16n8k32 product), and the prompt GEMM (gemm_tc.cuh) decodes
// every weight into shared memory behind a block barrier a k step; both
// spend most of their time in that arithmetic (H200, Llama-3.1-8B Q4_K_M, a
// 64-row step: gate + up 170 us a layer, where its 66 MB take 22 us to read;
// here 89 us). A warp decodes its 16 weight rows' quants to F16 once per
// 256-value block in its registers (a nibble pair to an F16 pair: a byte
// permute into 1024 + q, a subtraction, then q * d sc - dmin m in one F16
// FMA) and runs m16n8k16 products on them for up to 64 rows, whose
// activations were rounded to F16 once by a small kernel ahead
// (round_rows_f16_kernel) and are staged in shared memory for the block's 4
// warps: no per-product scaling.
//
// As in gemm_rows_half.cuh, the k order inside a product is free as long as
// A and B agree: a lane's A slots hold the values its bytes carry (Q4_K:
// bytes 8t..8t+7 of a 32-byte run, values 64i + 8t.. in the low nibbles and
// 64i + 32 + 8t.. in the high; Q6_K_X8: l = 16h + 4t..4t+3 of each run) and
// its B slots the same k of its token.
//
// Precision: F16 operands and F32 sums, as the prompt GEMM. A weight is
// q * half(d sc) - half(dmin m) rounded once (gemm_tc.cuh rounds the float
// d sc q - dmin m instead), an activation x rounded to F16 (saturated).
//
// Blocks, splits and the store are gemm_rows.cuh's (4 warps over 64 weight
// rows, NT groups of 8 rows, split-K over blockIdx.z from the shapes and the
// GPU alone, partials added in ascending split order). Batch invariance: a
// row's output is its own column of the products, summed over the k steps in
// ascending order and then over the splits; its activations are rounded
// alone; the row count picks NT and the slices only. Included once, by
// matmul.cu, after gemm_rows_q8.cuh (whose weight loads it shares).
#pragma once
#include "gemm_rows_q8.cuh"

namespace akunu {
namespace gemm_rows {

constexpr int kKqStages = 2;  // 256-value blocks of weights in flight a warp

// Four unsigned bytes (each < 256) as two F16 pairs 1024 + b: bytes 0, 1 (lo) and 2, 3 (hi).
__device__ __forceinline__ void bytes_as_half2(uint32_t b, uint32_t& lo, uint32_t& hi) {
    lo = __byte_perm(b, 0x64646464u, 0x4140);
    hi = __byte_perm(b, 0x64646464u, 0x4342);
}
// An F16 pair 1024 + q (bytes_as_half2) as (q - off) * s + m.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t biased, __half2 off, __half2 s, __half2 m) {
    return half2_bits(__hfma2(__hsub2(as_half2(biased), off), s, m));
}

// Q4_K, from Q4KRows's registers: product p (0: bytes 0..3, 1: bytes 4..7 of
// the lane's 8) of run i, nibble h of rows g (r0) and g + 8 (r1) as an A fragment.
struct Q4KHalf {
    using Rows = Q4KRows;
    static constexpr int kLaneValues = 8;  // a lane's run of values in a product pair (from 8 t)
    // halves a staged token row is padded by: rows 16 banks apart keep a
    // quarter warp's 16-byte loads (rows g, g + 1) on distinct banks
    static constexpr int kPad = 32;
    template <int NT>
    __device__ static void apply(const Q4KRows::Regs& r0, const Q4KRows::Regs& r1, const __half* xr, size_t group,
                                 int k0, float (&acc)[NT][4]) {
        const __half2 off = __float2half2_rn(1024.0f);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const gemv_formats::Q4KGroup s0 = gemv_formats::q4k_group(r0.head, i);
            const gemv_formats::Q4KGroup s1 = gemv_formats::q4k_group(r1.head, i);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const __half2 d0 = __float2half2_rn(h ? s0.d_hi : s0.d_lo), m0 = __float2half2_rn(-(h ? s0.m_hi : s0.m_lo));
                const __half2 d1 = __float2half2_rn(h ? s1.d_hi : s1.d_lo), m1 = __float2half2_rn(-(h ? s1.m_hi : s1.m_lo));
                const int sh = 4 * h;
                const uint32_t q0[2] = {(r0.q[i].x >> sh) & 0x0F0F0F0Fu, (r0.q[i].y >> sh) & 0x0F0F0F0Fu};
                const uint32_t q1[2] = {(r1.q[i].x >> sh) & 0x0F0F0F0Fu, (r1.q[i].y >> sh) & 0x0F0F0F0Fu};
                uint32_t a[2][4];
#pragma unroll
                for (int p = 0; p < 2; p++) {
                    uint32_t l0, h0, l1, h1;
                    bytes_as_half2(q0[p], l0, h0);
                    bytes_as_half2(q1[p], l1, h1);
                    a[p][0] = dequant_pair(l0, off, d0, m0);
                    a[p][1] = dequant_pair(l1, off, d1, m1);
                    a[p][2] = dequant_pair(h0, off, d0, m0);
                    a[p][3] = dequant_pair(h1, off, d1, m1);
                }
                const int k = k0 + 64 * i + 32 * h;  // the lane's 8 values start at k (xr: + 8 t)
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const uint4 b = *reinterpret_cast<const uint4*>(xr + j * group + k);
                    mma_16816(acc[j], a[0], b.x, b.y);
                    mma_16816(acc[j], a[1], b.z, b.w);
                }
            }
        }
    }
};

// Q6_K_X8, from Q6KX8Rows's registers: half n, run r, scale half hi (values
// l = 16 hi + 4t..4t+3 of the run) of rows g and g + 8 as an A fragment.
struct Q6KX8Half {
    using Rows = Q6KX8Rows;
    static constexpr int kLaneValues = 4;  // a lane's run of values in a product (from 4 t)
    // (rows 8 banks apart: a half warp's 8-byte loads, rows g..g + 3, on distinct banks)
    static constexpr int kPad = 16;
    // the lane's 4 unsigned 6-bit quants (q + 32) of half n, run r, part hi
    __device__ static uint32_t quants(const Q6KX8Rows::Regs& r, int n, int run, int hi) {
        const uint32_t lo4 = (r.ql[n][2 * (run % 2) + hi] >> (run < 2 ? 0 : 4)) & 0x0F0F0F0Fu;
        return lo4 | (((r.qh[n][hi] >> (2 * run)) & 0x03030303u) << 4);
    }
    template <int NT>
    __device__ static void apply(const Q6KX8Rows::Regs& r0, const Q6KX8Rows::Regs& r1, const __half* xr,
                                 size_t group, int k0, float (&acc)[NT][4]) {
        const __half2 off = __float2half2_rn(1056.0f), zero = __float2half2_rn(0.0f);
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int run = 0; run < 4; run++)
#pragma unroll
                for (int hi = 0; hi < 2; hi++) {
                    const __half2 s0 = __float2half2_rn(Q6KX8Rows::scale(r0, n, run, hi));
                    const __half2 s1 = __float2half2_rn(Q6KX8Rows::scale(r1, n, run, hi));
                    uint32_t l0, h0, l1, h1;
                    bytes_as_half2(quants(r0, n, run, hi), l0, h0);
                    bytes_as_half2(quants(r1, n, run, hi), l1, h1);
                    const uint32_t a[4] = {dequant_pair(l0, off, s0, zero), dequant_pair(l1, off, s1, zero),
                                           dequant_pair(h0, off, s0, zero), dequant_pair(h1, off, s1, zero)};
                    // the lane's 4 values start at k (xr: + 4 t)
                    const int k = k0 + 128 * n + 32 * run + 16 * hi;
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        const uint2 b = *reinterpret_cast<const uint2*>(xr + j * group + k);
                        mma_16816(acc[j], a, b.x, b.y);
                    }
                }
    }
};

// x (m rows x_stride floats apart) to F16 rows of K, saturated at +-65504,
// 8 values a thread; rows m..gridDim.y - 1 (padding up to a whole group of
// the GEMM's rows) zeros, so that its lanes read every row at one stride.
__global__ void __launch_bounds__(256)
    round_rows_f16_kernel(const float* __restrict__ x, uint32_t x_stride, uint32_t m, uint32_t K,
                          __half* __restrict__ out) {
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t t = blockIdx.y, i = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= K) return;
    if (t >= m) {
        *reinterpret_cast<uint4*>(out + (size_t)t * K + i) = make_uint4(0, 0, 0, 0);
        return;
    }
    const float4* src = reinterpret_cast<const float4*>(x + (size_t)t * x_stride + i);
    const float4 u = src[0], v = src[1];
    const uint4 h = make_uint4(pack_half2(saturate_f16(u.x), saturate_f16(u.y)),
                               pack_half2(saturate_f16(u.z), saturate_f16(u.w)),
                               pack_half2(saturate_f16(v.x), saturate_f16(v.y)),
                               pack_half2(saturate_f16(v.z), saturate_f16(v.w)));
    *reinterpret_cast<uint4*>(out + (size_t)t * K + i) = h;
}

// Dynamic shared memory of a <F, NT> block: two stages of its tokens' F16
// activations, 256 values (one weight block) a token.
template <class F, int NT>
constexpr int kq_shared_bytes() { return 2 * 8 * NT * (256 + F::kPad) * 2; }

// Each 256-value block's activations of the block's tokens are staged in
// shared memory by cp.async one block ahead (the 4 warps share them: read
// by every warp from L2 they were most of the kernel's time), each warp's
// weights kKqStages blocks ahead in registers.
// (64 rows: 3 blocks an SM, up to 168 registers a thread; 4 spilled them)
template <class F, int NT>
__global__ void __launch_bounds__(kThreads, NT == 8 ? 3 : kBlocksPerSm)
    gemm_rows_kq_kernel(MatmulParams p, Segments sg, const __half* __restrict__ x16, Split split) {
    using Rows = typename F::Rows;
    constexpr int kTokens = 8 * NT, kLdx = 256 + F::kPad;
    extern __shared__ __align__(16) uint8_t smem[];  // kq_shared_bytes<F, NT>()
    auto xs = reinterpret_cast<__half(*)[kTokens][kLdx]>(smem);  // [2]
    const int tid = threadIdx.x, g = tid % 32 / 4, tq = tid % 4;
    const WarpTile wt = warp_tile<NT>(p, sg, Rows::row_bytes((int)p.K));
    const int K = wt.K;

    const int nb_all = K / Rows::kBlock;
    const int b0 = split.steps ? (int)blockIdx.z * split.steps : 0;
    const int nb = split.steps ? min(nb_all - b0, split.steps) : nb_all;

    // Block b's activations (the rounding padded the pass to whole groups
    // with zeros) to stage s, a commit group of their own.
    auto stage = [&](int b, int st) {
        for (int c = tid; c < kTokens * 32; c += kThreads) {  // 32 copies of 16 bytes a token
            const int t = c / 32, o = 8 * (c % 32);
            copy16_async(&xs[st][t][o], x16 + (size_t)(wt.t0 + t) * K + (size_t)b * 256 + o, true);
        }
        copy_commit();
    };

    // Weights: a ring of kKqStages blocks in registers; a slot is refilled
    // (kKqStages blocks on) once its block is multiplied. The first loads
    // before the wait (immutable weights), while the rounding kernel runs.
    typename Rows::Regs ring[kKqStages][2];
#pragma unroll
    for (int s = 0; s < kKqStages; s++)
        if (s < nb) {
            ring[s][0] = Rows::load(wt.lo, b0 + s, tq);
            ring[s][1] = Rows::load(wt.hi, b0 + s, tq);
        }
    pdl_wait();
    pdl_launch_dependents();
    stage(b0, 0);

    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int base = 0; base < nb; base += kKqStages) {
#pragma unroll
        for (int s = 0; s < kKqStages; s++) {
            const int b = base + s;
            if (b >= nb) break;
            const int st = b & 1;
            __syncthreads();  // every warp is done with stage st ^ 1 (block b - 1) ...
            if (b + 1 < nb) stage(b0 + b + 1, st ^ 1);  // ... before block b + 1 refills it
            else copy_commit();                          // (an empty group keeps the wait count)
            copy_wait<1>();   // block b's copies landed (this thread's) ...
            __syncthreads();  // ... and everyone's
            F::template apply<NT>(ring[s][0], ring[s][1], &xs[st][g][F::kLaneValues * tq], (size_t)8 * kLdx, 0, acc);
            if (b + kKqStages < nb) {
                ring[s][0] = Rows::load(wt.lo, b0 + b + kKqStages, tq);
                ring[s][1] = Rows::load(wt.hi, b0 + b + kKqStages, tq);
            }
        }
    }
    copy_wait<0>();
    store_tile<NT>(acc, split, blockIdx.y, wt.n0, wt.t0, wt.st.N, wt.M, wt.st.y, wt.st.y_stride, wt.st.bias);
}

// The decode rows of sg's matrices in slices of kSliceRows: each slice's
// activations rounded to F16 (the device's activation scratch, half 0), then
// its rows in groups of 8, 16, 32 or 64 by its count. False (nothing
// enqueued) where the scratch cannot hold a full slice.
template <class F>
bool launch_rows_kq(const CudaArgs& a, MatmulParams p, Segments sg, const float* x) {
    using Rows = typename F::Rows;
    const size_t half_bytes = a.act_scratch_bytes / 2 / 256 * 256;
    if (!a.act_scratch || (size_t)kSliceRows * p.K * sizeof(__half) > half_bytes) return false;  // (slices padded to at most kSliceRows)
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    __half* x16 = reinterpret_cast<__half*>(a.act_scratch);
    const unsigned tiles = gemm_tc::place_segments<kRows>(sg);
    Split split;
    const unsigned splits = plan_split(a, tiles, p.K / Rows::kBlock, &split);
    for_each_slice(p, sg, x, [&](const MatmulParams& ps, const Segments& slice, const float* xs) {
        const unsigned nt = ps.n_tokens <= 8 ? 1 : ps.n_tokens <= 16 ? 2 : ps.n_tokens <= 32 ? 4 : 8;
        const unsigned groups = blocks_for(ps.n_tokens, 8 * nt);
        launch_pdl(round_rows_f16_kernel, dim3(blocks_for(ps.K / 8, 256), groups * 8 * nt), 256, 0, a, xs,
                   ps.x_stride, ps.n_tokens, ps.K, x16);
        auto go = [&](auto kernel, int shared) {
            allow_dynamic_shared((const void*)kernel, shared);
            launch_pdl(kernel, dim3(groups, tiles, splits), kThreads, shared, a, ps, slice, (const __half*)x16, split);
        };
        if (nt == 1) go(gemm_rows_kq_kernel<F, 1>, kq_shared_bytes<F, 1>());
        else if (nt == 2) go(gemm_rows_kq_kernel<F, 2>, kq_shared_bytes<F, 2>());
        else if (nt == 4) go(gemm_rows_kq_kernel<F, 4>, kq_shared_bytes<F, 4>());
        else go(gemm_rows_kq_kernel<F, 8>, kq_shared_bytes<F, 8>());
    });
    return true;
}

}  // namespace gemm_rows

// Enqueues the decode rows of up to three matrices of one K and format (sg;
// p: K, n_tokens, dtype, x_stride) on the F16-decoding row-side GEMM; false
// when kquant_rows finds no layout of it.
inline bool launch_gemm_rows_kq(const CudaArgs& a, const MatmulParams& p, const float* x, const gemm_tc::Segments& sg) {
    return with_kquant_rows<gemm_rows::Q4KHalf, gemm_rows::Q6KX8Half>(
        p, sg, [&](auto f) { return gemm_rows::launch_rows_kq<decltype(f)>(a, p, sg, x); });
}

}  // namespace akunu
