// Expert matmuls of many-token passes (prefill) on the tensor cores: the
// grouped GEMM of llama.cpp's mul_mat_id, with moe_matmul's meaning
// (core/kernel_params.h, MoeMatmulParams).
//
// Per window of tokens, moe_list_kernel lists each expert's routed rows
// (token, slot) in ascending order and moe_tiles_kernel cuts the lists into
// tiles of BM rows; block (column tile x, tile y) then runs gemm_tc.cuh's
// tile k loop over its tile's rows: each row's activations gathered from
// x(t, j), W[e]'s rows decoded to F16 as the dense prefill GEMM decodes
// them. Experts no token of the window chose get no block and are not read.
//
// Per slot (weighted = 0) the products go to y(t, j). The weighted sum goes
// through a scratch of the window's slot products, each already multiplied
// by its weight; moe_slot_sum_kernel then adds a token's slots in ascending
// (expert id, slot), the order of the CPU and of moe.cu's other kernels, so
// a row's result rests on its own activations and route alone. (Each
// weighted product is rounded to F32 before the sum, where the float kernels
// may fuse the multiply into the add: at most an ulp a slot apart.)
//
// Precision: F16 operands and F32 sums, as the dense prefill GEMM (gemm_tc.cuh).
// Included once, by moe.cu.
#pragma once
#include <algorithm>

#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "gemm_tc.cuh"

namespace akunu {
namespace moe_tc {

using namespace nvcuda;
using gemm_tc::kCld;
using gemm_tc::kWarpTile;

constexpr uint32_t kListRows = 4096;  // routed rows listed at once: a window's (token, slot) entries
constexpr int kBN = 64, kBK = 64;     // weight rows and k a step of a block's tile
constexpr uint32_t kMaxUsed = 32;     // slots a token the sum orders (moe_route's bound is lower)

struct Window {
    const uint8_t* W;
    size_t row_bytes, expert_bytes;
    const float* x;
    float* y;
    const uint8_t* route;
    const float* bias;     // N floats an expert, or nullptr
    uint32_t t0, t1;       // the window's tokens [t0, t1)
    uint32_t n0, n1;       // the launch's weight rows (output columns) [n0, n1)
    float* slots;          // weighted: [t - t0][j][n - n0] weighted slot products; nullptr: per slot into y
};

__device__ inline const int32_t* route_ids(const MoeMatmulParams& p, const uint8_t* route, uint32_t t) {
    return reinterpret_cast<const int32_t*>(route + (size_t)t * p.route_stride * 4);
}

// Each expert's routed rows of a window, listed once before the window's
// GEMM (no GEMM block scans the route), in the device's activation scratch:
//   counts[e]             rows of expert e;
//   rows[e * stride + i]  its entries (t - t0) * n_used + j, ascending;
//   tiles[0]              the window's tiles of BM rows: every expert's
//                         ceil(count / BM), in ascending expert;
//   tiles[1 + y]          tile y: its expert << 16 | its index in the expert.
// A GEMM block takes one tile: BM rows of work whatever its expert's count,
// and no block for an expert nobody chose.
struct Lists {
    uint32_t* counts;
    uint32_t* rows;
    uint32_t* tiles;
    uint32_t stride;  // a window's entries: the most rows one expert may get
};

constexpr int kListThreads = 512;

// Block e: expert e's rows in ascending entry order. Each warp takes a run
// of consecutive entries; its rows go after those of the warps before it.
__global__ void __launch_bounds__(kListThreads) moe_list_kernel(MoeMatmulParams p, Window w, Lists l) {
    __shared__ uint32_t warp_counts[kListThreads / 32];
    const uint32_t e = blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t entries = (w.t1 - w.t0) * p.n_used;
    const uint32_t run = (entries + kListThreads - 1) / kListThreads * 32;  // whole ballots a warp
    const uint32_t begin = warp * run, end = min(entries, begin + run);
    auto hit = [&](uint32_t i) {
        return i < end && route_ids(p, w.route, w.t0 + i / p.n_used)[i % p.n_used] - (int32_t)p.first_expert == (int32_t)e;
    };
    uint32_t n = 0;
    for (uint32_t base = begin; base < end; base += 32) n += __popc(__ballot_sync(0xffffffffu, hit(base + lane)));
    if (lane == 0) warp_counts[warp] = n;
    __syncthreads();
    uint32_t at = 0;
    for (int v = 0; v < warp; v++) at += warp_counts[v];
    uint32_t* out = l.rows + (size_t)e * l.stride;
    for (uint32_t base = begin; base < end; base += 32) {
        const bool h = hit(base + lane);
        const unsigned ballot = __ballot_sync(0xffffffffu, h);
        if (h) out[at + __popc(ballot & ((1u << lane) - 1u))] = base + lane;
        at += __popc(ballot);
    }
    if (threadIdx.x == kListThreads - 1) l.counts[e] = at;  // the last warp's end: the expert's count
}

constexpr int kTileThreads = 1024;

// One block: the window's tiles of bm rows, in ascending expert.
__global__ void __launch_bounds__(kTileThreads) moe_tiles_kernel(uint32_t n_experts, uint32_t bm, Lists l) {
    __shared__ uint32_t sums[kTileThreads];
    const uint32_t per = (n_experts + kTileThreads - 1) / kTileThreads;
    const uint32_t e0 = min(n_experts, threadIdx.x * per), e1 = min(n_experts, e0 + per);
    uint32_t mine = 0;
    for (uint32_t e = e0; e < e1; e++) mine += (l.counts[e] + bm - 1) / bm;
    sums[threadIdx.x] = mine;
    __syncthreads();
    for (int d = 1; d < kTileThreads; d *= 2) {  // inclusive scan of the threads' tile counts
        const uint32_t v = threadIdx.x >= (unsigned)d ? sums[threadIdx.x - d] : 0u;
        __syncthreads();
        sums[threadIdx.x] += v;
        __syncthreads();
    }
    uint32_t y = sums[threadIdx.x] - mine;
    for (uint32_t e = e0; e < e1; e++)
        for (uint32_t q = 0, n = (l.counts[e] + bm - 1) / bm; q < n; q++) l.tiles[1 + y++] = e << 16 | q;
    if (threadIdx.x == kTileThreads - 1) l.tiles[0] = sums[threadIdx.x];
}

// Block (column tile x, y): tile y of the window's lists, if there is one.
template <class F, int BM>
__global__ void __launch_bounds__(2 * kBN) moe_gemm_tc_kernel(MoeMatmulParams p, Window w, Lists l) {
    using S = gemm_tc::TileShape<F, kBN, kBK, BM>;
    constexpr int kThreads = S::kThreads, kWarpsN = S::kWarpsN, kWarpM = S::kWarpM;
    constexpr int kQuads = S::kQuads, kXVec = S::kXVec;
    extern __shared__ __align__(128) uint8_t smem[];  // gemm_tc::tile_shared_bytes<kBN, kBK, BM>()
    if (blockIdx.y >= l.tiles[0]) return;  // (the whole block)
    const uint32_t tile = l.tiles[1 + blockIdx.y], e = tile >> 16, m0 = (tile & 0xffffu) * BM;
    const uint32_t count = min(l.counts[e] - m0, (uint32_t)BM);  // the tile's rows
    const uint32_t* rows = l.rows + (size_t)e * l.stride + m0;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN;
    const uint32_t N = p.N, n0 = w.n0 + blockIdx.x * kBN, quad = tid % kQuads;
    // rows past n1 read the launch's last one (computed, never written)
    const uint8_t* wrow = w.W + (size_t)e * w.expert_bytes + (size_t)min(n0 + tid / 2, w.n1 - 1) * w.row_bytes;
    const uint32_t n = n0 + wn * kWarpTile + lane;
    const float b = w.bias && n < w.n1 ? w.bias[(size_t)e * N + n] : 0.0f;
    // this thread's activation rows: the tile's routed rows (past count: the last one, never written)
    const float* xp[kXVec];
#pragma unroll
    for (int i = 0; i < kXVec; i++) {
        const uint32_t r = rows[min((uint32_t)(tid / kQuads + i * (kThreads / kQuads)), count - 1)];
        xp[i] = w.x + (size_t)(w.t0 + r / p.n_used) * p.x_stride + (size_t)(r % p.n_used) * p.x_slot_stride + 4 * quad;
    }
    gemm_tc::TileAcc<BM> acc;
    gemm_tc::tile_k_loop<F, kBN, kBK, BM>(wrow, xp, 0, (int)p.K / kBK, smem, acc, [] {});
    const float* cw = gemm_tc::stage_outputs<kBN, BM>(smem, acc);
    if (n < w.n1)
        for (int tt = 0; tt < kWarpM; tt++) {
            const uint32_t i = wm * kWarpM + tt;
            if (i >= count) break;
            const uint32_t r = rows[i], t = w.t0 + r / p.n_used, j = r % p.n_used;
            const float v = cw[tt * kCld + lane] + b;
            if (w.slots) {
                const float weight = reinterpret_cast<const float*>(route_ids(p, w.route, t))[p.n_used + j];
                w.slots[((size_t)(t - w.t0) * p.n_used + j) * (w.n1 - w.n0) + (n - w.n0)] = weight * v;
            } else {
                w.y[(size_t)t * p.y_stride + (size_t)j * p.y_slot_stride + n] = v;
            }
        }
}

// Block t - t0: y(t, n) for n in [n0, n1) = the sum of token t's held slot
// products in ascending (expert id, slot), from zero; slots whose id the
// tensor does not hold add nothing.
__global__ void moe_slot_sum_kernel(MoeMatmulParams p, Window w) {
    __shared__ uint32_t order[kMaxUsed];
    __shared__ uint32_t held;
    const uint32_t t = w.t0 + blockIdx.x;
    if (threadIdx.x == 0) {
        const int32_t* ids = route_ids(p, w.route, t);
        uint32_t k = 0;
        for (uint32_t j = 0; j < p.n_used; j++) {
            const int32_t e = ids[j] - (int32_t)p.first_expert;
            if (e < 0 || (uint32_t)e >= p.n_experts) continue;
            uint32_t at = k++;  // insertion: ascending (id, slot)
            while (at > 0 && ids[order[at - 1]] > ids[j]) {
                order[at] = order[at - 1];
                at--;
            }
            order[at] = j;
        }
        held = k;
    }
    __syncthreads();
    const uint32_t width = w.n1 - w.n0;
    const float* s = w.slots + (size_t)blockIdx.x * p.n_used * width;
    for (uint32_t c = threadIdx.x; c < width; c += blockDim.x) {
        float sum = 0.0f;
        for (uint32_t q = 0; q < held; q++) sum += s[(size_t)order[q] * width + c];
        w.y[(size_t)t * p.y_stride + w.n0 + c] = sum;
    }
}

// Windows of `window` tokens; in each, the lists, then the GEMM (and the
// weighted sum) over column windows of `cols` weight rows.
template <class F, int BM>
void launch_windows(const CudaArgs& a, const MoeMatmulParams& p, Window w, Lists l, uint32_t window, uint32_t cols) {
    constexpr int shared = gemm_tc::tile_shared_bytes<kBN, kBK, BM>();
    allow_dynamic_shared((const void*)moe_gemm_tc_kernel<F, BM>, shared);
    for (uint32_t t0 = 0; t0 < p.n_tokens; t0 += window) {
        w.t0 = t0;
        w.t1 = std::min(p.n_tokens, t0 + window);
        const uint32_t entries = (w.t1 - w.t0) * p.n_used;
        moe_list_kernel<<<p.n_experts, kListThreads, 0, a.stream>>>(p, w, l);
        moe_tiles_kernel<<<1, kTileThreads, 0, a.stream>>>(p.n_experts, BM, l);
        for (w.n0 = 0; w.n0 < p.N; w.n0 += cols) {
            w.n1 = std::min(p.N, w.n0 + cols);
            // the most tiles the lists can hold: each expert's last one may be partial
            const dim3 grid(blocks_for(w.n1 - w.n0, kBN), (entries + BM - 1) / BM + std::min(p.n_experts, entries));
            moe_gemm_tc_kernel<F, BM><<<grid, 2 * kBN, shared, a.stream>>>(p, w, l);
            if (w.slots) moe_slot_sum_kernel<<<w.t1 - w.t0, 256, 0, a.stream>>>(p, w);
        }
    }
}

}  // namespace moe_tc

// Enqueues the expert matmuls of a many-token pass on the tensor cores and
// returns true where they suit it (the dense prefill GEMM's formats and
// alignment, K a multiple of 64, float4 activation rows; the weighted sum's
// scratch); false leaves the pass to moe.cu's float kernels.
inline bool launch_moe_gemm_tc(const CudaArgs& a, const MoeMatmulParams& p, size_t row_bytes) {
    using namespace moe_tc;
    if (p.K == 0 || p.K % kBK != 0 || p.n_used > kMaxUsed || p.n_used > kListRows) return false;
    const uintptr_t x = reinterpret_cast<uintptr_t>(a.b<float>(1));
    if (x % 16 || p.x_stride % 4 || p.x_slot_stride % 4) return false;
    Window w{};
    w.W = a.b<uint8_t>(0);
    w.row_bytes = row_bytes;
    w.expert_bytes = row_bytes * p.N;
    w.x = a.b<float>(1);
    w.y = a.b<float>(2);
    w.route = a.b<uint8_t>(3);
    w.bias = p.bias ? a.b<float>(4) : nullptr;
    uint32_t window = kListRows / p.n_used;  // tokens whose entries are listed at once
    uint32_t cols = p.N;                     // weight rows a GEMM launch computes
    if (p.weighted) {
        // the slot products of a window's columns in the split-K scratch's
        // partials area (its tile counters, kept zero, are not touched):
        // whole windows of tokens in column windows, so that the tiles stay full
        if (!a.split_scratch || a.split_scratch_bytes <= gemm_tc::kSplitCounterBytes) return false;
        const size_t floats = (a.split_scratch_bytes - gemm_tc::kSplitCounterBytes) / sizeof(float);
        const size_t fit = floats / ((size_t)window * p.n_used) / kBN * kBN;  // whole tiles of columns
        if (fit == 0) return false;
        cols = (uint32_t)std::min<size_t>(p.N, fit);
        w.slots = reinterpret_cast<float*>(a.split_scratch + gemm_tc::kSplitCounterBytes);
    }
    // the lists in the activation scratch: counts, tiles (at most
    // kListRows / 32 + n_experts), then n_experts lists of a window's entries
    if (!a.act_scratch) return false;
    const size_t words = a.act_scratch_bytes / sizeof(uint32_t), head = 2 * (size_t)p.n_experts + 1 + kListRows / 32;
    if (words <= head) return false;
    window = (uint32_t)std::min<size_t>(window, (words - head) / ((size_t)p.n_experts * p.n_used));
    if (window == 0) return false;
    Lists l;
    l.counts = reinterpret_cast<uint32_t*>(a.act_scratch);
    l.tiles = l.counts + p.n_experts;
    l.rows = l.tiles + 1 + kListRows / 32 + p.n_experts;
    l.stride = window * p.n_used;
    return gemm_tc::with_tc_format(p.dtype, p.K, reinterpret_cast<uintptr_t>(w.W) | row_bytes, [&](auto tag) {
        using F = typename decltype(tag)::type;
        // tiles of 64 routed rows (CudaTuning::moe_tile_rows: 32)
        if (a.tuning->moe_tile_rows == 32) moe_tc::launch_windows<F, 32>(a, p, w, l, window, cols);
        else moe_tc::launch_windows<F, 64>(a, p, w, l, window, cols);
    });
}

}  // namespace akunu
