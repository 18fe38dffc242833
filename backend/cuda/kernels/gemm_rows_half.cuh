// Row-side tensor-core GEMM for F16 / BF16 weights: the decode rows of
// batch tables, y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]), as gemm_rows.cuh
// computes them, without its shared-memory weight tile.
//
// The m16n8k16 product sums its 16 k values in an order of its own, so which
// physical k a fragment slot holds is free as long as A and B agree. Here a
// lane's A slots are 8 consecutive weights of its rows g and g + 8 (one
// 16-byte load each, the four lanes of a row covering 64 contiguous bytes),
// and its B slots the same 8 k of its token: each lane loads its operands
// straight from global memory into registers, with no shared memory, no
// ldmatrix and no barrier inside the k loop. A warp streams its 16 weight
// rows as the single-stream GEMV does, several 64-wide k steps in flight.
// Half weights need no decoding (BF16 is rounded to F16 as TcBF16 stores
// it), so the shared-memory tile of gemm_rows.cuh was pure overhead for them.
//
// Blocks, splits and the store are gemm_rows.cuh's (4 warps over 64 weight
// rows, NT groups of 8 rows, split-K over blockIdx.z from the shapes and the
// GPU alone, partials added in ascending split order), with more, lighter
// blocks an SM; matrices that would split their k loop 8 ways or more take
// gemm_rows_half_warps_kernel instead (16 rows a block, the k loop split over
// its warps). Batch invariance: a
// row's output is its own column of the products, summed over the k steps in
// ascending order and then over the splits; its activations are rounded to
// F16 alone; the row count picks NT and the slices only. Included once, by
// matmul.cu (after gemm_rows.cuh).
#pragma once
#include "gemm_rows.cuh"
#include "gemv_formats.cuh"

namespace akunu {
namespace gemm_rows {

constexpr int kHalfStepK = 64;  // k a warp step: 4 products of 16, 8 weights a lane and row twice
// k steps of weights in flight a lane (128 bytes), and blocks an SM (at most
// 85 registers a thread): 24 warps an SM, the split's one wave sized to them.
// (H200, Llama-3.2-1B F16, 1-row step, the per-command sum: 2 steps and 6
// blocks 1.17 ms of projections, 2 and 8 1.29, 3 and 6 1.50, 4 and 4 1.26.)
constexpr int kHalfStages = 2;
constexpr int kHalfBlocksPerSm = 6;

// 8 weights (4 pairs, the first of each in the low half) as F16 pairs: F16
// as is, BF16 rounded to nearest as TcBF16::store rounds it.
template <bool Bf16>
__device__ __forceinline__ uint4 half_pairs(uint4 w) {
    if (!Bf16) return w;
    auto pair = [](uint32_t u) { return pack_half2(__uint_as_float(u << 16), __uint_as_float(u & 0xFFFF0000u)); };
    return make_uint4(pair(w.x), pair(w.y), pair(w.z), pair(w.w));
}

// Two 4-value runs of x as the B fragment of one product (k slots 2t, 2t+1 <- x.x, x.y; 2t+8, 2t+9 <- x.z, x.w).
__device__ __forceinline__ void b_pairs(const float4& v, uint32_t& b0, uint32_t& b1) {
    b0 = pack_half2(saturate_f16(v.x), saturate_f16(v.y));
    b1 = pack_half2(saturate_f16(v.z), saturate_f16(v.w));
}

// One warp's products over k steps [kt0, kt0 + nk) of its 16 weight rows
// (this lane's at w_lo and w_hi, 16 * (lane % 4) bytes in) and its token rows
// xr, Stages steps of weights in flight, into acc. A step's weights of this
// lane: rows g and g + 8, k [8 tq, 8 tq + 8) and [32 + 8 tq, 32 + 8 tq + 8) of
// the step. Launched as a programmatic dependent: the first steps' weights
// (immutable) load before pdl_wait, while the previous kernel finishes.
template <bool Bf16, int NT, int Stages>
__device__ __forceinline__ void half_rows_steps(const uint8_t* w_lo, const uint8_t* w_hi, const float* const (&xr)[NT],
                                                int kt0, int nk, float (&acc)[NT][4]) {
    uint4 ring[Stages][4];
    auto fetch = [&](uint4 (&w)[4], int kt) {
        const size_t at = (size_t)(kt0 + kt) * kHalfStepK * 2;
        w[0] = gemv_formats::ld_stream_u4(w_lo + at);
        w[1] = gemv_formats::ld_stream_u4(w_hi + at);
        w[2] = gemv_formats::ld_stream_u4(w_lo + at + 64);
        w[3] = gemv_formats::ld_stream_u4(w_hi + at + 64);
    };
#pragma unroll
    for (int s = 0; s < Stages; s++)
        if (s < nk) fetch(ring[s], s);
    pdl_wait();
    pdl_launch_dependents();

#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

    for (int base = 0; base < nk; base += Stages) {
#pragma unroll
        for (int s = 0; s < Stages; s++) {
            const int kt = base + s;
            if (kt >= nk) break;
            uint4 w[4];
#pragma unroll
            for (int i = 0; i < 4; i++) w[i] = half_pairs<Bf16>(ring[s][i]);
            if (kt + Stages < nk) fetch(ring[s], kt + Stages);
            const int k = (kt0 + kt) * kHalfStepK;
#pragma unroll
            for (int h = 0; h < 2; h++) {  // k [32 h + 8 tq, + 8) of the step
                const uint4 lo = w[2 * h], hi = w[2 * h + 1];
                // product 0: k + 0..3 of the run (a0, a2 row g; a1, a3 row g + 8); product 1: k + 4..7
                const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
                const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const float4* xv = reinterpret_cast<const float4*>(xr[j] + k + 32 * h);
                    uint32_t b0, b1;
                    b_pairs(__ldg(xv), b0, b1);
                    mma_16816(acc[j], a0, b0, b1);
                    b_pairs(__ldg(xv + 1), b0, b1);
                    mma_16816(acc[j], a1, b0, b1);
                }
            }
        }
    }
}

template <bool Bf16, int NT>
__global__ void __launch_bounds__(kThreads, kHalfBlocksPerSm)
    gemm_rows_half_kernel(MatmulParams p, Segments sg, const float* __restrict__ x, Split split) {
    const int g = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
    const WarpTile wt = warp_tile<NT>(p, sg, (size_t)p.K * 2);
    const int K = wt.K;
    const uint8_t* w_lo = wt.lo + 16 * tq;
    const uint8_t* w_hi = wt.hi + 16 * tq;
    // (tokens past the pass read the pass's last: computed, never written)
    const float* xr[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) xr[j] = x + (size_t)min(wt.t0 + 8 * j + g, wt.M - 1) * p.x_stride + 8 * tq;

    const int nk_all = K / kHalfStepK;
    const int kt0 = split.steps ? (int)blockIdx.z * split.steps : 0;
    const int nk = split.steps ? min(nk_all - kt0, split.steps) : nk_all;

    float acc[NT][4];
    half_rows_steps<Bf16, NT, kHalfStages>(w_lo, w_hi, xr, kt0, nk, acc);

    store_tile<NT>(acc, split, blockIdx.y, wt.n0, wt.t0, wt.st.N, wt.M, wt.st.y, wt.st.y_stride, wt.st.bias);
}

// Matrices whose 64-row tiles are too few to fill the GPU without splitting
// their k loop 8 ways or more (the O and down projections, Q / K / V: N of
// 2048-4096 against K of 2048-14336) take blocks of 16 weight rows instead,
// the k steps dealt to the block's kWarpSplit warps in contiguous runs and
// their sums added in warp order through shared memory: no partials in
// global memory, no counters, no last block summing the splits after the
// others (a split-K block streams only 6-16 steps of weights, and those
// costs were most of its time: H200, Llama-3.2-1B F16, 4 rows, the down
// projection at 1.7 TB/s and O at 0.8 against 2.9 for gate + up). A row's
// sums keep an order fixed by K alone.
constexpr int kWarpSplit = 8;
constexpr int kWarpStages = 3;      // 192 bytes of weights in flight a lane
constexpr unsigned kWarpSplitMin = 8;  // split-K splits from which the matrices take this kernel

template <bool Bf16, int NT>
__global__ void __launch_bounds__(32 * kWarpSplit, 2)
    gemm_rows_half_warps_kernel(MatmulParams p, Segments sg, const float* __restrict__ x) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tq = lane % 4;
    const SegmentTile st = segment_tile<16>(sg, blockIdx.y);
    const int K = (int)p.K, M = (int)p.n_tokens, N = st.N;
    const int n0 = st.row0, t0 = (int)blockIdx.x * 8 * NT;
    const size_t row_bytes = (size_t)K * 2;
    const uint8_t* w_lo = st.W + (size_t)min(n0 + g, N - 1) * row_bytes + 16 * tq;
    const uint8_t* w_hi = st.W + (size_t)min(n0 + g + 8, N - 1) * row_bytes + 16 * tq;
    const float* xr[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) xr[j] = x + (size_t)min(t0 + 8 * j + g, M - 1) * p.x_stride + 8 * tq;

    // this warp's run of k steps
    const int nk_all = K / kHalfStepK, per = (nk_all + kWarpSplit - 1) / kWarpSplit;
    const int kt0 = warp * per, nk = max(0, min(per, nk_all - kt0));

    float acc[NT][4];
    half_rows_steps<Bf16, NT, kWarpStages>(w_lo, w_hi, xr, kt0, nk, acc);

    // the warps' sums in warp order, by warp 0
    __shared__ float sums[kWarpSplit][NT][4][32];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) sums[warp][j][e][lane] = acc[j][e];
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float v = sums[0][j][e][lane];
            for (int w = 1; w < kWarpSplit; w++) v += sums[w][j][e][lane];
            const int n = n0 + g + 8 * (e >> 1), t = t0 + 8 * j + 2 * tq + (e & 1);
            if (n < N && t < M) st.y[(size_t)t * st.y_stride + n] = v + (st.bias ? st.bias[n] : 0.0f);
        }
}

template <bool Bf16>
void launch_rows_half(const CudaArgs& a, const MatmulParams& p, Segments sg, const float* x) {
    const unsigned tiles = gemm_tc::place_segments<kRows>(sg);
    Split split;
    const unsigned splits = plan_split(a, tiles, p.K / kHalfStepK, &split, kHalfBlocksPerSm);
    if (splits >= kWarpSplitMin) {
        const unsigned tiles16 = gemm_tc::place_segments<16>(sg);
        for_each_slice(p, sg, x, [&](const MatmulParams& ps, const Segments& slice, const float* xs) {
            const unsigned nt = ps.n_tokens <= 8 ? 1 : ps.n_tokens <= 16 ? 2 : 4;
            const auto kernel = nt == 1   ? gemm_rows_half_warps_kernel<Bf16, 1>
                                : nt == 2 ? gemm_rows_half_warps_kernel<Bf16, 2>
                                          : gemm_rows_half_warps_kernel<Bf16, 4>;
            launch_pdl(kernel, dim3(blocks_for(ps.n_tokens, 8 * nt), tiles16), 32 * kWarpSplit, 0, a, ps, slice,
                       xs);
        });
        return;
    }
    for_each_slice(p, sg, x, [&](const MatmulParams& ps, const Segments& slice, const float* xs) {
        const unsigned nt = ps.n_tokens <= 8 ? 1 : ps.n_tokens <= 16 ? 2 : 4;
        const auto kernel = nt == 1   ? gemm_rows_half_kernel<Bf16, 1>
                            : nt == 2 ? gemm_rows_half_kernel<Bf16, 2>
                                      : gemm_rows_half_kernel<Bf16, 4>;
        launch_pdl(kernel, dim3(blocks_for(ps.n_tokens, 8 * nt), tiles, splits), kThreads, 0, a, ps, slice, xs,
                   split);
    });
}

}  // namespace gemm_rows

// Enqueues the decode rows of up to three F16 or BF16 matrices of one K (sg;
// p: K, n_tokens, dtype, x_stride) on gemm_rows_half_kernel; false when the
// format, K or alignment do not suit it.
inline bool launch_gemm_rows_half(const CudaArgs& a, const MatmulParams& p, const float* x,
                                  const gemm_tc::Segments& sg) {
    if (p.dtype != GGML_F16 && p.dtype != GGML_BF16) return false;
    if (p.n_tokens == 0 || p.K == 0 || p.K % gemm_rows::kHalfStepK != 0) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    for (uint32_t i = 0; i < sg.count; i++)
        if (sg.N[i] == 0 || (reinterpret_cast<uintptr_t>(sg.W[i]) & 15) != 0) return false;
    if (p.dtype == GGML_F16) gemm_rows::launch_rows_half<false>(a, p, sg, x);
    else gemm_rows::launch_rows_half<true>(a, p, sg, x);
    return true;
}

}  // namespace akunu
