// Tensor-core GEMM for many-token passes (prefill): y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]).
//
// A block computes BM tokens x BN weight rows: 128 x 128 where one wave of
// such blocks nearly fills the GPU, else 64 x 128 or 64 x 64 (launch()).
// Per 64-wide k step (32 for K not a multiple of 64) it stages in shared
// memory the activations, rounded to F16 (saturated at +-65504), and the
// weights, decoded from their format to F16; its 2 x BN/32 warps then run
// 16x16x16 WMMA products (F16 operands, F32 accumulation), BM/2 x 32 outputs
// per warp. Double-buffered: the next step's global loads are in flight, raw,
// in registers while the tensor cores work on the current step, so each
// format is split into `load` (global memory -> raw registers) and `store`
// (raw -> 16 decoded F16 weights in shared memory). A thread owns 16-element
// units of one weight row (BN rows x 2 per 32 of k = 2 BN threads).
//
// Precision: both operands are F16 (11 significant bits), sums are F32 — as
// llama.cpp's cuBLAS path for F16 weights; tests/test_device_kernels.py states
// the bound. The formats' meaning is core/quant_blocks.h (the CPU twin).
// Included once, by matmul.cu.
#pragma once
#include <cuda_fp16.h>
#include <mma.h>

#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "mma.cuh"
#include "tc_formats.cuh"

namespace akunu {
namespace gemm_tc {

using namespace nvcuda;
using namespace tc_formats;

constexpr int kMinBK = 32;     // k per step: 32 or 64 (a multiple of every format's unit pair)
constexpr int kWarpTile = 32;   // a warp's outputs: BM / 2 tokens x 32 rows
constexpr int kCld = kWarpTile + 4;  // floats per row of a warp's output staging


// Split K (gridDim.z > 1, decode rows of batch tables): block z sums the
// k steps [z * split_steps, (z + 1) * split_steps) into F32 partials; the last
// block of an output tile to finish (a counter per tile) adds the tile's
// partials in ascending z, so the sum's order rests on N and K alone.
struct SplitK {
    int steps = 0;                 // k steps per split (0: no split)
    float* partials = nullptr;     // [gridDim.z][gridDim.y * BM][gridDim.x * BN]
    uint32_t* counters = nullptr;  // one per (x, y) tile, zero between launches
};

// The matrices of a launch: one, or up to three of one K and format (q, k, v
// or gate, up of a batch pass). Block column x belongs to the matrix whose
// columns [tile0, tile0 + ceil(N / BN)) hold it; each block's work is the
// one it would have in that matrix's own launch.
struct Segments {
    const uint8_t* W[3] = {};
    float* y[3] = {};
    const float* bias[3] = {};
    uint32_t N[3] = {};
    uint32_t y_stride[3] = {};
    uint32_t tile0[3] = {};
    uint32_t count = 1;
};

// sg's field `f` of matrix i, without indexing the parameter array by a
// register (which would copy it to local memory).
#define AKUNU_SEGMENT_FIELD(sg, f, i) ((i) == 0 ? (sg).f[0] : (i) == 1 ? (sg).f[1] : (sg).f[2])

// After a block wrote its split's partials: counts its arrival at the
// tile's counter (the block's threads together) and tells whether it came
// last of the gridDim.z splits, every other split's partials then visible.
__device__ __forceinline__ bool last_split_to_arrive(uint32_t* counter) {
    __threadfence();  // this block's partials visible before its arrival is counted
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.z - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// The k loop of one block's tile, shared by this file's kernel and the
// expert GEMM (moe_gemm_tc.cuh): k steps [kt0, kt0 + nk) of this thread's
// weight row wrow (units wu of row wr = tid / 2) against the BM activation
// rows whose float4 columns xp[i] point at (row tid / kQuads + i kThreads /
// kQuads of the tile, at column 4 (tid % kQuads)), into the warps'
// accumulators. before_activations() runs after the first step's weight
// loads are issued and before any activation is read (the programmatic
// dependent launch's wait). smem: tile_shared_bytes<BN, BK, BM>().
template <int BM>
using TileAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>[BM / 32][2];

template <class F, int BN, int BK, int BM>
struct TileShape {
    static constexpr int kThreads = 2 * BN, kWarpsN = BN / kWarpTile, kWarpM = BM / 2, kFragsM = kWarpM / 16;
    static constexpr int kLds = BK + 8;                    // halves per shared row: fragment loads conflict-free
    static constexpr int kUnits = BK / 32;                 // weight unit pairs of a row per step
    static constexpr int kQuads = BK / 4;                  // activation float4s per token row per step
    static constexpr int kXVec = BM * kQuads / kThreads;  // activation float4s per thread per step
};

template <class F, int BN, int BK, int BM, class Before>
__device__ __forceinline__ void tile_k_loop(const uint8_t* __restrict__ wrow, const float* const (&xp)[TileShape<F, BN, BK, BM>::kXVec],
                                            int kt0, int nk, uint8_t* smem, TileAcc<BM>& acc, Before&& before_activations) {
    using S = TileShape<F, BN, BK, BM>;
    constexpr int kThreads = S::kThreads, kWarpsN = S::kWarpsN, kWarpM = S::kWarpM, kFragsM = S::kFragsM;
    constexpr int kLds = S::kLds, kUnits = S::kUnits, kQuads = S::kQuads, kXVec = S::kXVec;
    __half* xs = reinterpret_cast<__half*>(smem);  // [2][BM][kLds]
    __half* ws = xs + 2 * BM * kLds;               // [2][BN][kLds]
    const int tid = threadIdx.x, warp = tid / 32;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN;
    const int wr = tid / 2, wu = tid % 2, quad = tid % kQuads;

    typename F::Raw wraw[kUnits];
    float4 xr[kXVec];
    auto fetch = [&](int k0) {  // global -> registers
#pragma unroll
        for (int u = 0; u < kUnits; u++) wraw[u] = F::load(wrow, k0 + 32 * u, wu);
#pragma unroll
        for (int i = 0; i < kXVec; i++) xr[i] = *reinterpret_cast<const float4*>(xp[i] + k0);
    };
    auto stage = [&](int buf, int k0) {  // registers -> F16 shared tiles
#pragma unroll
        for (int u = 0; u < kUnits; u++) F::store(wraw[u], ws + (buf * BN + wr) * kLds + 32 * u, k0 + 32 * u, wu);
#pragma unroll
        for (int i = 0; i < kXVec; i++) {
            const float4 v = xr[i];
            *reinterpret_cast<uint2*>(xs + (buf * BM + tid / kQuads + i * (kThreads / kQuads)) * kLds + 4 * quad) =
                make_uint2(pack_half2(saturate_f16(v.x), saturate_f16(v.y)),
                           pack_half2(saturate_f16(v.z), saturate_f16(v.w)));
        }
    };
#pragma unroll
    for (int u = 0; u < kUnits; u++) wraw[u] = F::load(wrow, kt0 * BK + 32 * u, wu);
    before_activations();
#pragma unroll
    for (int i = 0; i < kXVec; i++) xr[i] = *reinterpret_cast<const float4*>(xp[i] + kt0 * BK);
    stage(0, kt0 * BK);
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kFragsM; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt & 1;
        const bool more = kt + 1 < nk;
        if (more) fetch((kt0 + kt + 1) * BK);  // next step's loads in flight during this step's products
        const __half* xa = xs + (cur * BM + wm * kWarpM) * kLds;
        const __half* wb = ws + (cur * BN + wn * kWarpTile) * kLds;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[kFragsM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < kFragsM; i++) wmma::load_matrix_sync(a[i], xa + 16 * i * kLds + kk, kLds);
#pragma unroll
            for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], wb + 16 * j * kLds + kk, kLds);
#pragma unroll
            for (int i = 0; i < kFragsM; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        if (more) stage(cur ^ 1, (kt0 + kt + 1) * BK);
        __syncthreads();
    }
}

// A warp's accumulators into its output staging in shared memory (the tiles
// are no longer read); returns the staging: row tt of the warp's BM / 2
// tokens at + tt * kCld, column l of the warp's 32 weight rows at + l.
template <int BN, int BM>
__device__ __forceinline__ float* stage_outputs(uint8_t* smem, TileAcc<BM>& acc) {
    const int warp = threadIdx.x / 32;
    float* cw = reinterpret_cast<float*>(smem) + warp * (BM / 2) * kCld;
#pragma unroll
    for (int i = 0; i < BM / 32; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(cw + 16 * i * kCld + 16 * j, acc[i][j], kCld, wmma::mem_row_major);
    __syncwarp();
    return cw;
}

template <class F, int BN, int BK, int BM>
__global__ void __launch_bounds__(2 * BN)
    gemm_tc_kernel(MatmulParams p, Segments sg, const float* __restrict__ x, SplitK split) {
    using S = TileShape<F, BN, BK, BM>;
    constexpr int kThreads = S::kThreads, kWarpsN = S::kWarpsN, kWarpM = S::kWarpM;
    constexpr int kQuads = S::kQuads, kXVec = S::kXVec;
    extern __shared__ __align__(128) uint8_t smem[];  // tile_shared_bytes<BN, BK, BM>()

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN;
    const uint32_t seg = sg.count > 1 && blockIdx.x >= sg.tile0[1] ? (sg.count > 2 && blockIdx.x >= sg.tile0[2] ? 2 : 1) : 0;
    const uint8_t* __restrict__ W = AKUNU_SEGMENT_FIELD(sg, W, seg);
    float* __restrict__ y = AKUNU_SEGMENT_FIELD(sg, y, seg);
    const float* __restrict__ bias = AKUNU_SEGMENT_FIELD(sg, bias, seg);
    const size_t y_stride = AKUNU_SEGMENT_FIELD(sg, y_stride, seg);
    const int n0 = (int)(blockIdx.x - AKUNU_SEGMENT_FIELD(sg, tile0, seg)) * BN, t0 = blockIdx.y * BM;
    const int M = (int)p.n_tokens, N = (int)AKUNU_SEGMENT_FIELD(sg, N, seg), K = (int)p.K;
    // This thread's weight units (16 elements each: u of every 32); rows past
    // N and tokens past M read the last one (computed, never written).
    const uint8_t* wrow = W + (size_t)min(n0 + tid / 2, N - 1) * (K / F::kElems) * F::kBytes;
    const int quad = tid % kQuads;
    const float* xp[kXVec];
#pragma unroll
    for (int i = 0; i < kXVec; i++)
        xp[i] = x + (size_t)min(t0 + tid / kQuads + i * (kThreads / kQuads), M - 1) * p.x_stride + 4 * quad;

    const int nk_all = K / BK;
    const int kt0 = split.steps ? (int)blockIdx.z * split.steps : 0;
    const int nk = split.steps ? min(nk_all - kt0, split.steps) : nk_all;
    // Launched as a programmatic dependent (launch_pdl): the first step's
    // weights (immutable) load while the previous kernel finishes; the
    // activations and the split scratch only after the wait.
    TileAcc<BM> acc;
    tile_k_loop<F, BN, BK, BM>(wrow, xp, kt0, nk, smem, acc, [] {
        pdl_wait();
        pdl_launch_dependents();
    });

    // Outputs through shared memory: a lane writes one row n for the warp's
    // tokens, coalesced along n.
    const float* cw = stage_outputs<BN, BM>(smem, acc);
    const int n = n0 + wn * kWarpTile + lane;
    if (split.steps == 0) {
        if (n >= N) return;
        const float b = bias ? bias[n] : 0.0f;
        for (int tt = 0; tt < kWarpM; tt++) {
            const int t = t0 + wm * kWarpM + tt;
            if (t >= M) break;
            y[(size_t)t * y_stride + n] = cw[tt * kCld + lane] + b;
        }
        return;
    }
    const size_t rows = (size_t)gridDim.y * BM;  // partial rows per split
    // partial columns: the launch's block columns side by side
    const size_t width = (size_t)gridDim.x * BN, col = (size_t)blockIdx.x * BN + wn * kWarpTile + lane;
    if (n < N)
        for (int tt = 0; tt < kWarpM; tt++) {
            const int t = t0 + wm * kWarpM + tt;
            if (t >= M) break;
            split.partials[((size_t)blockIdx.z * rows + t) * width + col] = cw[tt * kCld + lane];
        }
    uint32_t* counter = split.counters + blockIdx.y * gridDim.x + blockIdx.x;
    if (!last_split_to_arrive(counter)) return;
    if (n < N) {
        const float b = bias ? bias[n] : 0.0f;
        for (int tt = 0; tt < kWarpM; tt++) {
            const int t = t0 + wm * kWarpM + tt;
            if (t >= M) break;
            float sum = 0.0f;
            for (unsigned z = 0; z < gridDim.z; z++) sum += __ldcg(split.partials + ((size_t)z * rows + t) * width + col);
            y[(size_t)t * y_stride + n] = sum + b;
        }
    }
    if (tid == 0) *counter = 0;  // ready for the next launch
}

// Dynamic shared memory of a <BN, BK, BM> kernel: two stages of tiles, or the output staging.
template <int BN, int BK, int BM>
constexpr int tile_shared_bytes() {
    const int tiles = 2 * (BM + BN) * (BK + 8) * 2, outputs = (2 * BN / 32) * (BM / 2) * kCld * 4;
    return tiles > outputs ? tiles : outputs;
}

// Block columns of each matrix of `sg` for tiles of BN rows; fills sg.tile0.
template <int BN>
unsigned place_segments(Segments& sg) {
    unsigned tiles = 0;
    for (uint32_t i = 0; i < sg.count; i++) {
        sg.tile0[i] = tiles;
        tiles += blocks_for(sg.N[i], BN);
    }
    return tiles;
}

template <class F, int BN, int BK, int BM>
void launch_segments(const CudaArgs& a, const MatmulParams& p, Segments sg, const float* x, unsigned splits = 1,
                     SplitK split = {}) {
    constexpr int shared = tile_shared_bytes<BN, BK, BM>();
    allow_dynamic_shared((const void*)gemm_tc_kernel<F, BN, BK, BM>, shared);
    const unsigned tiles = place_segments<BN>(sg);
    const dim3 grid(tiles, blocks_for(p.n_tokens, BM), splits);
    launch_pdl(gemm_tc_kernel<F, BN, BK, BM>, grid, 2 * BN, shared, a, p, sg, x, split);
}

// One matrix: W (buffer 0), y, bias.
inline Segments one_segment(const CudaArgs& a, const MatmulParams& p, float* y, const float* bias) {
    Segments sg;
    sg.W[0] = a.b<uint8_t>(0);
    sg.y[0] = y;
    sg.bias[0] = bias;
    sg.N[0] = p.N;
    sg.y_stride[0] = p.y_stride;
    return sg;
}

template <class F, int BN, int BK, int BM>
void launch_tiles(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    launch_segments<F, BN, BK, BM>(a, p, one_segment(a, p, y, bias), x);
}

// Decode rows of batch tables (a handful of rows): one tile of rows, the k
// loop split so that the weights stream from several waves of blocks, as a
// decode GEMV's do, instead of one serial k loop per weight tile. The tile
// (BN from N, BK from K) and the split (from N, K and the GPU's SM count)
// never depend on the rows, so a row's sum is the same in any batch; rows
// run in slices of kSplitRows to bound the partials.
constexpr unsigned kSplitRows = 64;
constexpr size_t kSplitCounterBytes = 64u << 10;

struct SplitPlan {
    unsigned splits = 1, steps = 0;
};

// tiles: block columns of the launch; cols: their columns side by side.
inline SplitPlan split_plan(size_t sms, unsigned tiles, unsigned cols, unsigned K, unsigned bk, size_t scratch_bytes) {
    SplitPlan plan;
    const unsigned nk = K / bk;
    const size_t target = 4 * sms;  // blocks: several per SM keep loads in flight
    // (tile counters in the lower half of the counter area; the paged
    // attention's split counters use the upper half)
    if (tiles >= target / 2 || nk < 4 || tiles > kSplitCounterBytes / 8) return plan;
    unsigned s = (unsigned)std::min<size_t>((target + tiles - 1) / tiles, nk / 2);
    s = std::min(s, 32u);
    while (s > 1 && (size_t)s * kSplitRows * cols * 4 > scratch_bytes - kSplitCounterBytes) s--;
    if (s <= 1) return plan;
    plan.steps = (nk + s - 1) / s;
    plan.splits = (nk + plan.steps - 1) / plan.steps;  // no empty split
    return plan;
}

// The decode rows of `sg`'s matrices (rows x_stride / y_stride apart), the k
// loop split as split_plan says for the launch's block columns, in slices of
// kSplitRows rows.
template <class F, int BN, int BK>
void launch_split_tiles(const CudaArgs& a, MatmulParams p, Segments sg, const float* x) {
    const unsigned tiles = place_segments<BN>(sg);
    const SplitPlan plan = split_plan((size_t)a.tuning->sm_count, tiles, tiles * BN, p.K, BK,
                                      a.split_scratch ? a.split_scratch_bytes : 0);
    SplitK split;
    split.steps = plan.splits > 1 ? (int)plan.steps : 0;
    split.counters = reinterpret_cast<uint32_t*>(a.split_scratch);
    split.partials = reinterpret_cast<float*>(a.split_scratch + kSplitCounterBytes);
    const uint32_t total = p.n_tokens;
    for (uint32_t t0 = 0; t0 < total; t0 += kSplitRows) {
        p.n_tokens = std::min(kSplitRows, total - t0);
        Segments slice = sg;
        for (uint32_t i = 0; i < sg.count; i++) slice.y[i] = sg.y[i] + (size_t)t0 * sg.y_stride[i];
        launch_segments<F, BN, BK, 64>(a, p, slice, x + (size_t)t0 * p.x_stride, split.steps ? plan.splits : 1,
                                       split);
    }
}

// Tiles from the matrices' total rows: 128 where half a wave of them fills the GPU.
template <class F>
void launch_split(const CudaArgs& a, const MatmulParams& p, const Segments& sg, const float* x) {
    unsigned n_all = 0;
    for (uint32_t i = 0; i < sg.count; i++) n_all += sg.N[i];
    const bool wide = (size_t)blocks_for(n_all, 128) * 2 >= (size_t)a.tuning->sm_count;
    if (p.K % 64 != 0) {
        if (wide) launch_split_tiles<F, 128, 32>(a, p, sg, x);
        else launch_split_tiles<F, 64, 32>(a, p, sg, x);
    } else if (wide) {
        launch_split_tiles<F, 128, 64>(a, p, sg, x);
    } else {
        launch_split_tiles<F, 64, 64>(a, p, sg, x);
    }
}

// A token's output sums its K products in one order whatever the tile:
// 16-wide k slices in ascending k, each one 16x16x16 product accumulated
// into the F32 fragment in turn (BK 32 or 64 only groups those slices into
// staging steps), and the token's activations are rounded to F16 alone;
// rows past the pass are read (clamped) but never written. So neither
// n_tokens nor the tile changes a row's result, and the prompt rows of batch
// tables (MatmulParams::invariant) take the tile their count suits, as any
// other pass (tests/test_cuda_batch_invariance.py compares rows of passes
// across the tile thresholds with the same rows alone).
template <class F>
void launch(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias, bool decode_rows) {
    const size_t sms = (size_t)a.tuning->sm_count, fill = 2 * sms;
    if (decode_rows) {
        launch_split<F>(a, p, one_segment(a, p, y, bias), x);
        return;
    }
    auto blocks = [&](unsigned bn, unsigned bm) { return (size_t)blocks_for(p.N, bn) * blocks_for(p.n_tokens, bm); };
    if (p.K % 64 != 0) {  // 32 k a step
        if (blocks(128, 64) >= fill) launch_tiles<F, 128, 32, 64>(a, p, x, y, bias);
        else launch_tiles<F, 64, 32, 64>(a, p, x, y, bias);
        return;
    }
    // 128 x 128 tiles (twice the work per staged byte) where one wave of them
    // nearly fills the GPU (8B-sized matrices gain; 2048-row ones would leave SMs idle), else narrower ones
    const bool big = blocks(128, 128) * 10 >= sms * 9;
    if (big) launch_tiles<F, 128, 64, 128>(a, p, x, y, bias);
    else if (blocks(128, 64) >= fill) launch_tiles<F, 128, 64, 64>(a, p, x, y, bias);
    else launch_tiles<F, 64, 64, 64>(a, p, x, y, bias);
}

template <class F>
struct FormatTag {
    using type = F;
};

// Calls fn(FormatTag<F>{}) for the tensor-core format of `dtype` and returns
// true, when the format, K and the weights' alignment (`w_bits`: the OR of
// the weight addresses) suit the kernel; else false.
template <class Fn>
bool with_tc_format(uint32_t dtype, uint32_t K, uintptr_t w_bits, Fn&& fn) {
    switch (dtype) {
        case GGML_F16: if (w_bits % 16) return false; fn(FormatTag<TcF16>{}); return true;
        case GGML_BF16: if (w_bits % 16) return false; fn(FormatTag<TcBF16>{}); return true;
        case GGML_F32: if (w_bits % 16) return false; fn(FormatTag<TcF32>{}); return true;
        case GGML_Q8_0: if (w_bits % 2) return false; fn(FormatTag<TcQ8_0>{}); return true;
        case GGML_Q4_0: if (w_bits % 2) return false; fn(FormatTag<TcQ4_0>{}); return true;
        case GGML_Q4_1: if (w_bits % 2) return false; fn(FormatTag<TcQ4_1>{}); return true;
        case GGML_Q5_0: if (w_bits % 2) return false; fn(FormatTag<TcQ5_0>{}); return true;
        case GGML_Q5_1: if (w_bits % 2) return false; fn(FormatTag<TcQ5_1>{}); return true;
        case GGML_MXFP4: fn(FormatTag<TcMXFP4>{}); return true;  // byte loads: any alignment
        case AKUNU_Q8_0_X8: if (K % 256 || w_bits % 16) return false; fn(FormatTag<TcQ8_0X8>{}); return true;
        case AKUNU_Q4_0_X8: if (K % 256 || w_bits % 16) return false; fn(FormatTag<TcQ4_0X8>{}); return true;
        case AKUNU_Q6_K_X8: if (K % 2048 || w_bits % 16) return false; fn(FormatTag<TcQ6_KX8>{}); return true;
        case GGML_Q4_K: if (K % 256 || w_bits % 16) return false; fn(FormatTag<TcQ4_K>{}); return true;
        case GGML_Q6_K: if (K % 256 || w_bits % 2) return false; fn(FormatTag<TcQ6_K>{}); return true;
        default: return false;
    }
}

}  // namespace gemm_tc

// Enqueues y = W x (+ bias) on the tensor cores (F16 operands, F32
// accumulation) and returns true when the format, K (a multiple of 32) and
// alignment suit the kernel; false leaves the pass to the float kernels.
// decode_rows: the rows are a batch table's decode rows (launch_split).
inline bool launch_gemm_tc(const CudaArgs& a, const MatmulParams& p, const float* x, float* y,
                           bool decode_rows = false) {
    using namespace gemm_tc;
    if (p.n_tokens == 0 || p.N == 0 || p.K == 0 || p.K % kMinBK != 0) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;  // float4 loads
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    return with_tc_format(p.dtype, p.K, reinterpret_cast<uintptr_t>(a.buf[0]), [&](auto tag) {
        launch<typename decltype(tag)::type>(a, p, x, y, bias, decode_rows);
    });
}

// The decode rows of up to three matrices of one K and format (sg) in one
// launch of the split-K kernel (p: K, n_tokens, dtype, x_stride); false when
// the format, K or alignment do not suit it.
// Calls fn(FormatTag<F>{}) and returns true when sg's matrices (p: K,
// n_tokens, dtype, x_stride) and x suit the decode-row kernels (this file's
// launch_split, gemm_rows.cuh): K a multiple of 32, float4 activation loads,
// a tensor-core format at the weights' alignment; else false.
template <class Fn>
bool with_segments_format(const MatmulParams& p, const float* x, const gemm_tc::Segments& sg, Fn&& fn) {
    using namespace gemm_tc;
    if (p.n_tokens == 0 || p.K == 0 || p.K % kMinBK != 0) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    uintptr_t w_bits = 0;
    for (uint32_t i = 0; i < sg.count; i++) {
        if (sg.N[i] == 0) return false;
        w_bits |= reinterpret_cast<uintptr_t>(sg.W[i]);
    }
    return with_tc_format(p.dtype, p.K, w_bits, fn);
}

inline bool launch_gemm_tc_split_segments(const CudaArgs& a, const MatmulParams& p, const float* x,
                                          const gemm_tc::Segments& sg) {
    return with_segments_format(p, x, sg, [&](auto tag) {
        gemm_tc::launch_split<typename decltype(tag)::type>(a, p, sg, x);
    });
}

}  // namespace akunu
