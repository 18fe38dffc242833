// Tensor-core GEMM for the decode rows of batch tables: y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n])
// for the few rows t a continuous batch generates a step (one token a sequence).
//
// The prompt GEMM (gemm_tc.cuh) puts the rows on the 16-high side of its
// products and pads them to a 64-row tile, so at 1-8 rows it stages and
// multiplies mostly padding, and keeps one k step of weights in flight. Here
// the weights take the 16-row side of the m16n8k16 product (mma.cuh) and the
// rows its 8-wide side, so a block multiplies 8, 16 or 32 rows (NT = 1, 2, 4
// groups of 8), and each warp keeps 2-4 k steps of its 16 weight rows in
// flight in registers: a handful of rows streams the weights as a decode
// GEMV does, and each weight read serves every row of the block.
//
// A block is 4 warps over 64 weight rows (16 each) and NT x 8 rows; per 64-wide
// k step (32 where K is not a multiple of 64) each warp decodes its rows'
// units (tc_formats.cuh: the formats of the prompt GEMM) into its own F16
// tile (read by ldmatrix), the step's activations arrive by cp.async in a
// ring of F32 tiles, and each lane rounds its B operands to F16 as it
// builds them for the 16 x 8 x 16 products. The k
// loop is split over blockIdx.z where the matrices have too few tiles to
// fill the GPU: each split writes F32 partials, and the last block of a tile
// to arrive adds them in ascending split order (gemm_tc.cuh's scheme, and its
// scratch).
//
// Batch invariance: a row's output is its own column of the products, summed
// over 16-wide k slices in ascending k into an F32 fragment, then over the
// splits in ascending order; the tile and the split come from N, K and the
// SM count alone, and a row's activations are rounded to F16 alone. So the
// number of rows (which picks NT and the row slices) never changes a row's
// result. Included once, by matmul.cu.
#pragma once
#include "async_copy.cuh"
#include "gemm_tc.cuh"

namespace akunu {
namespace gemm_rows {

using namespace tc_formats;
using gemm_tc::Segments;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;       // weight rows a block
constexpr unsigned kSliceRows = 64;      // rows a launch (bounds the partials)
constexpr unsigned kBlocksPerSm = 4;     // split target: blocks for every SM
constexpr unsigned kMaxSplits = 32;

// Split K: block z sums the k steps [z * steps, (z + 1) * steps) (steps 0: no split).
struct Split {
    int steps = 0;
    float* partials = nullptr;     // [gridDim.z][gridDim.x * 8 NT][gridDim.y * kRows]
    uint32_t* counters = nullptr;  // one per (y, x) block, zero between launches
};

// Raw k steps of weights a warp keeps in flight: three, two for wide raw units (F32).
// k steps a warp keeps in flight: up to 256 bytes of raw units a lane, at least two.
template <class F, int BK, int NT>
constexpr int stages_for() {
    constexpr int bytes = (int)sizeof(typename F::Raw) * (BK / 32), s = 256 / bytes;
    return s < 2 ? 2 : s > 4 ? 4 : s;
}

// Dynamic shared memory of a <F, BK, NT> block: the activation ring (F32)
// and each warp's decoded weight tile (F16).
template <class F, int BK, int NT>
constexpr int shared_bytes() {
    return stages_for<F, BK, NT>() * 8 * NT * (BK + 8) * 4 + kWarps * 16 * (BK + 8) * 2;
}

// The matrix of sg that block row `tile` falls in, and the tile's first weight row there.
struct SegmentTile {
    const uint8_t* W;
    float* y;
    const float* bias;
    size_t y_stride;
    int N, row0;
};
// (Rows: the weight rows a tile, as place_segments<Rows> placed them)
template <int Rows = kRows>
__device__ __forceinline__ SegmentTile segment_tile(const Segments& sg, uint32_t tile) {
    const uint32_t seg = sg.count > 1 && tile >= sg.tile0[1] ? (sg.count > 2 && tile >= sg.tile0[2] ? 2 : 1) : 0;
    return SegmentTile{AKUNU_SEGMENT_FIELD(sg, W, seg), AKUNU_SEGMENT_FIELD(sg, y, seg),
                       AKUNU_SEGMENT_FIELD(sg, bias, seg), AKUNU_SEGMENT_FIELD(sg, y_stride, seg),
                       (int)AKUNU_SEGMENT_FIELD(sg, N, seg),
                       (int)(tile - AKUNU_SEGMENT_FIELD(sg, tile0, seg)) * Rows};
}

// Where a warp of a block of NT groups of 8 rows works: the matrix of block
// row blockIdx.y (st), its 16 weight rows from n0, this lane's fragment rows
// n0 + g and n0 + g + 8 (g = lane / 4) at lo and hi (rows past N read the
// last one: computed, never written), and the block's rows (tokens) from t0
// of the slice's M. Kernels that load their own weights (gemm_rows_q8.cuh,
// gemm_rows_half.cuh) start from it.
struct WarpTile {
    SegmentTile st;
    int K, M, n0, t0;
    const uint8_t* lo;
    const uint8_t* hi;
};
template <int NT>
__device__ __forceinline__ WarpTile warp_tile(const MatmulParams& p, const Segments& sg, size_t row_bytes) {
    WarpTile w;
    w.st = segment_tile(sg, blockIdx.y);
    w.K = (int)p.K;
    w.M = (int)p.n_tokens;
    const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    w.n0 = w.st.row0 + warp * 16;
    w.t0 = (int)blockIdx.x * 8 * NT;
    w.lo = w.st.W + (size_t)min(w.n0 + g, w.st.N - 1) * row_bytes;
    w.hi = w.st.W + (size_t)min(w.n0 + g + 8, w.st.N - 1) * row_bytes;
    return w;
}

// A warp's products into y (+ bias), or with a split into the partials, the
// last split of the tile to arrive adding them in ascending split order.
// Fragment element e of group j: weight row n0 + g (+ 8 for e >= 2), row
// (token) t0 + 8j + 2t + e % 2 (the m16n8 C layout, mma.cuh). Every thread
// of the block calls it.
template <int NT>
__device__ __forceinline__ void store_tile(const float (&acc)[NT][4], const Split& split, uint32_t tile, int n0,
                                           int t0, int N, int M, float* __restrict__ y, size_t y_stride,
                                           const float* __restrict__ bias) {
    constexpr int kTokens = 8 * NT;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
    auto row_of = [&](int j, int e) { return 8 * j + 2 * tq + (e & 1); };
    auto col_of = [&](int e) { return g + 8 * (e >> 1); };
    if (split.steps == 0) {
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int n = n0 + col_of(e), t = t0 + row_of(j, e);
                if (n < N && t < M) y[(size_t)t * y_stride + n] = acc[j][e] + (bias ? bias[n] : 0.0f);
            }
        return;
    }
    const size_t rows = (size_t)gridDim.x * kTokens, width = (size_t)gridDim.y * kRows;
    const size_t col0 = (size_t)tile * kRows + warp * 16;
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int n = n0 + col_of(e), t = t0 + row_of(j, e);
            if (n < N && t < M)
                split.partials[((size_t)blockIdx.z * rows + t) * width + col0 + col_of(e)] = acc[j][e];
        }
    uint32_t* counter = split.counters + blockIdx.y * gridDim.x + blockIdx.x;
    if (!gemm_tc::last_split_to_arrive(counter)) return;
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int n = n0 + col_of(e), t = t0 + row_of(j, e);
            if (n >= N || t >= M) continue;
            float sum = 0.0f;
            for (unsigned z = 0; z < gridDim.z; z++)
                sum += __ldcg(split.partials + ((size_t)z * rows + t) * width + col0 + col_of(e));
            y[(size_t)t * y_stride + n] = sum + (bias ? bias[n] : 0.0f);
        }
    if (tid == 0) *counter = 0;  // ready for the next launch
}

template <class F, int BK, int NT>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    gemm_rows_kernel(MatmulParams p, Segments sg, const float* __restrict__ x, Split split) {
    constexpr int kTokens = 8 * NT, kPairs = BK / 32, kQuads = BK / 4;
    constexpr int kLds = BK + 8;        // halves per row of a warp's weight tile (ldmatrix conflict-free)
    constexpr int kLdx = BK + 8;        // floats per row of an activation tile (pair loads conflict-free)
    constexpr int kXAll = kTokens * kQuads, kXVec = (kXAll + kThreads - 1) / kThreads;
    constexpr int kStages = stages_for<F, BK, NT>();
    extern __shared__ __align__(16) uint8_t smem[];  // shared_bytes<F, BK, NT>()
    auto xs = reinterpret_cast<float(*)[kTokens][kLdx]>(smem);                                  // [kStages]
    auto ws = reinterpret_cast<__half(*)[16][kLds]>(smem + kStages * kTokens * kLdx * 4);     // [kWarps]

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const uint32_t tile = blockIdx.y;
    const SegmentTile st = segment_tile(sg, tile);
    const uint8_t* __restrict__ W = st.W;
    float* __restrict__ y = st.y;
    const float* __restrict__ bias = st.bias;
    const size_t y_stride = st.y_stride;
    const int N = st.N, K = (int)p.K, M = (int)p.n_tokens;
    const int n0 = st.row0 + warp * 16;
    const int t0 = (int)blockIdx.x * kTokens;

    // This lane's weight units: row n0 + lane / 2 (rows past N read the last
    // one: computed, never written), unit lane % 2 of every 32 of k.
    const int wr = lane / 2, wu = lane % 2;
    const uint8_t* wrow = W + (size_t)min(n0 + wr, N - 1) * (K / F::kElems) * F::kBytes;

    const int nk_all = K / BK;
    const int kt0 = split.steps ? (int)blockIdx.z * split.steps : 0;
    const int nk = split.steps ? min(nk_all - kt0, split.steps) : nk_all;

    // Weights: kStages steps in flight in registers (a ring indexed by the
    // unrolled stage). Activations: the same steps in flight by cp.async into
    // a ring of F32 tiles; rows past the pass are zeros (read nothing, never written).
    typename F::Raw wraw[kStages][kPairs];
    auto fetch_w = [&](typename F::Raw (&r)[kPairs], int kt) {
#pragma unroll
        for (int q = 0; q < kPairs; q++) r[q] = F::load(wrow, (kt0 + kt) * BK + 32 * q, wu);
    };
    auto fetch_x = [&](int kt) {
        if (kt < nk) {
            const int slot = kt % kStages;
#pragma unroll
            for (int i = 0; i < kXVec; i++) {
                const int e = tid + i * kThreads, t = e / kQuads;
                if (e < kXAll) {
                    const bool valid = t0 + t < M;
                    const float* src = x + (size_t)(valid ? t0 + t : 0) * p.x_stride + (kt0 + kt) * BK + 4 * (e % kQuads);
                    copy16_async(&xs[slot][t][4 * (e % kQuads)], src, valid);
                }
            }
        }
        copy_commit();  // (an empty group past the end keeps the wait counts uniform)
    };

    // Launched as a programmatic dependent: the first steps' weights
    // (immutable) load while the previous kernel finishes.
#pragma unroll
    for (int s = 0; s < kStages; s++)
        if (s < nk) fetch_w(wraw[s], s);
    pdl_wait();
    pdl_launch_dependents();
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) fetch_x(s);

    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

    const int g = lane / 4, tq = lane % 4;
    for (int base = 0; base < nk; base += kStages) {
#pragma unroll
        for (int s = 0; s < kStages; s++) {
            const int kt = base + s;
            if (kt >= nk) break;
#pragma unroll
            for (int q = 0; q < kPairs; q++) F::store(wraw[s][q], &ws[warp][wr][32 * q], (kt0 + kt) * BK + 32 * q, wu);
            if (kt + kStages < nk) fetch_w(wraw[s], kt + kStages);  // the step kStages on
            copy_wait<kStages - 2>();  // this step's activations landed (this thread's copies)
            // every thread's copies visible; the slot refilled below was read last step by every warp
            __syncthreads();
            fetch_x(kt + kStages - 1);
            const float(*xt)[kLdx] = xs[kt % kStages];
#pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                // A: the warp's 16 rows, k [kk, kk + 16)
                uint32_t a[4];
                ldmatrix_x4(a, &ws[warp][lane % 8 + 8 * ((lane / 8) % 2)][kk + 8 * (lane / 16)]);
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    // B: row 8j + g, k kk + 2t.. and kk + 8 + 2t.., rounded to F16 here
                    const float2 lo = *reinterpret_cast<const float2*>(&xt[8 * j + g][kk + 2 * tq]);
                    const float2 hi = *reinterpret_cast<const float2*>(&xt[8 * j + g][kk + 8 + 2 * tq]);
                    mma_16816(acc[j], a, pack_half2(saturate_f16(lo.x), saturate_f16(lo.y)),
                              pack_half2(saturate_f16(hi.x), saturate_f16(hi.y)));
                }
            }
            __syncwarp();  // ws[warp] read before the next step's decode
        }
    }
    copy_wait<0>();

    store_tile<NT>(acc, split, tile, n0, t0, N, M, y, y_stride, bias);
}

// The split of a launch over `tiles` block columns and nk k steps: as many
// splits as keep the blocks within one wave of blocks_per_sm on every SM, partials of a full slice within the
// scratch. From the matrices' shapes and the GPU alone, never the rows.
inline unsigned split_count(size_t sms, unsigned tiles, unsigned nk, size_t scratch_bytes,
                            unsigned blocks_per_sm = kBlocksPerSm) {
    const size_t target = (size_t)blocks_per_sm * sms;
    if (tiles >= target || nk < 2 || scratch_bytes <= gemm_tc::kSplitCounterBytes) return 1;
    // (counters: the lower half of gemm_tc's counter area, one per block of a slice)
    if ((size_t)tiles * (kSliceRows / 8) * 4 > gemm_tc::kSplitCounterBytes / 2) return 1;
    // (whole waves: a block count just over a wave would leave a second, mostly idle one)
    unsigned s = (unsigned)std::min<size_t>({target / tiles, nk, kMaxSplits});
    const size_t per_split = (size_t)kSliceRows * tiles * kRows * 4;
    while (s > 1 && s * per_split > scratch_bytes - gemm_tc::kSplitCounterBytes) s--;
    return s;
}

// The split of a launch over `tiles` block columns and nk k steps (split_count) into *split; returns the splits.
inline unsigned plan_split(const CudaArgs& a, unsigned tiles, unsigned nk, Split* split,
                           unsigned blocks_per_sm = kBlocksPerSm) {
    const unsigned s = split_count((size_t)a.tuning->sm_count, tiles, nk, a.split_scratch ? a.split_scratch_bytes : 0,
                                   blocks_per_sm);
    *split = Split{};
    if (s <= 1) return 1;
    split->steps = (int)((nk + s - 1) / s);
    const unsigned splits = (nk + split->steps - 1) / split->steps;  // no empty split
    split->counters = reinterpret_cast<uint32_t*>(a.split_scratch);
    split->partials = reinterpret_cast<float*>(a.split_scratch + gemm_tc::kSplitCounterBytes);
    if (splits == 1) split->steps = 0;
    return splits;
}

// The decode rows of sg's matrices (rows x_stride / y_stride apart) in slices
// of kSliceRows (the partials' bound): fn(p, slice, x) a slice, p.n_tokens
// its count, slice's outputs and x at its first row.
template <class Fn>
void for_each_slice(MatmulParams p, const Segments& sg, const float* x, Fn&& fn) {
    const uint32_t total = p.n_tokens;
    for (uint32_t t0 = 0; t0 < total; t0 += kSliceRows) {
        p.n_tokens = std::min(kSliceRows, total - t0);
        Segments slice = sg;
        for (uint32_t i = 0; i < sg.count; i++) slice.y[i] = sg.y[i] + (size_t)t0 * sg.y_stride[i];
        fn(p, slice, x + (size_t)t0 * p.x_stride);
    }
}

template <class F, int BK, int NT>
void launch_slice(const CudaArgs& a, const MatmulParams& p, const Segments& sg, const float* x, unsigned tiles,
                  unsigned splits, const Split& split) {
    constexpr int shared = shared_bytes<F, BK, NT>();
    allow_dynamic_shared((const void*)gemm_rows_kernel<F, BK, NT>, shared);
    const dim3 grid(blocks_for(p.n_tokens, 8 * NT), tiles, splits);
    launch_pdl(gemm_rows_kernel<F, BK, NT>, grid, kThreads, shared, a, p, sg, x, split);
}

// The decode rows of sg's matrices (rows x_stride / y_stride apart) in
// slices of kSliceRows, each slice's rows in groups of 8, 16 or 32 by its count.
template <class F, int BK>
void launch_rows(const CudaArgs& a, MatmulParams p, Segments sg, const float* x) {
    const unsigned tiles = gemm_tc::place_segments<kRows>(sg);
    Split split;
    const unsigned splits = plan_split(a, tiles, p.K / BK, &split);
    for_each_slice(p, sg, x, [&](const MatmulParams& ps, const Segments& slice, const float* xs) {
        if (ps.n_tokens <= 8) launch_slice<F, BK, 1>(a, ps, slice, xs, tiles, splits, split);
        else if (ps.n_tokens <= 16) launch_slice<F, BK, 2>(a, ps, slice, xs, tiles, splits, split);
        else launch_slice<F, BK, 4>(a, ps, slice, xs, tiles, splits, split);
    });
}

}  // namespace gemm_rows

// Enqueues the decode rows of up to three matrices of one K and format (sg;
// p: K, n_tokens, dtype, x_stride) on the row-side tensor-core GEMM; false
// when the format, K or alignment do not suit it.
inline bool launch_gemm_rows(const CudaArgs& a, const MatmulParams& p, const float* x, const gemm_tc::Segments& sg) {
    return with_segments_format(p, x, sg, [&](auto tag) {
        using F = typename decltype(tag)::type;
        if (p.K % 64 == 0) gemm_rows::launch_rows<F, 64>(a, p, sg, x);
        else gemm_rows::launch_rows<F, 32>(a, p, sg, x);
    });
}

}  // namespace akunu
