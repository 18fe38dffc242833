// One-token decode attention over a KV cache of another element type than F16
// (BF16, Q8_0, Q4_0: core/kv_layout.h), as flash-decoding: the key range is
// cut into splits, fixed by the cache size (never the position, so the
// launch is captured once in a decode graph), each a block that keeps an
// online softmax; a second kernel combines the splits of each head.
//
// A block serves HG query heads of one KV group, so each K / V row is read
// once for all of them; a key is HD / 8 lanes, each dequantizing 8 values in
// one load (kv_cache.cuh load8: 8 bytes of Q8_0 quants, 4 of Q4_0 nibbles,
// plus the block's scale), and a lane issues the loads of kUnroll keys
// before it uses them. The grid is fixed by the GPU (about four blocks an
// SM), and the kernels cut the position's keys into as many splits as the
// grid has rows, reading the position on the device (so one captured launch
// serves every position): a block takes one split, at least
// kMinKeysPerSplit keys, and pays its merge once, however deep the context.
//
// Precision as the F16 decode kernel (attention_decode.cuh): Q rounded to F16
// as the CPU twin does, scores and sums in F32, K / V dequantized exactly;
// the softmax weights are not rounded to F16.
//
// Included once, by attention.cu (attention_decode_kv::launch).
#pragma once
#include <algorithm>

#include "core/kernel_params.h"
#include "device_math.cuh"
#include "core/kv_layout.h"
#include "cuda_kernel.h"
#include "kv_cache.cuh"

namespace akunu {
namespace attention_decode_kv {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;                 // keys a lane group has in flight
constexpr uint32_t kMinKeysPerSplit = 128;
constexpr uint32_t kMaxSplits = 1024;
constexpr float kLog2e = 1.4426950408889634f;

// Keys of the window (or cache) and the position's key range [lo, pos].
__device__ __forceinline__ void key_range(const AttentionParams& p, const uint32_t* replay_pos, uint32_t& lo,
                                          uint32_t& n) {
    const uint32_t pos = replay_position(replay_pos, p.pos0);
    lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    n = pos + 1 - lo;
}

// Keys a split of n keys over `rows` splits (the last may hold fewer).
__device__ __forceinline__ uint32_t split_keys(uint32_t n, uint32_t rows) {
    return max(kMinKeysPerSplit, (n + rows - 1) / rows);
}

// KT / VT: the K and V types when the launch knows them (the kernel then
// holds one type's loads only), or -1 to read them from p.
template <int HD, int HG, int KT, int VT>
__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(AttentionParams p, uint32_t n_splits, const float* __restrict__ q,
                 const uint8_t* __restrict__ kc, const uint8_t* __restrict__ vc, float* __restrict__ partials,
                 const uint32_t* replay_pos) {
    constexpr int L = HD / 8;    // lanes a key
    constexpr int KPW = 32 / L;  // keys a warp step
    constexpr int kStates = kWarps * KPW;
    constexpr uint32_t kStep = kWarps * KPW * kUnroll;  // keys a block takes a step
    const uint32_t group = p.n_heads / p.n_kv_heads, passes = group / HG;
    const uint32_t kvh = blockIdx.x / passes, h0 = kvh * group + (blockIdx.x % passes) * HG;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, sub = lane / L, d0 = (lane % L) * 8;
    const uint32_t kv_dim = p.n_kv_heads * HD, koff = kvh * HD + d0;
    const uint32_t kt = KT >= 0 ? (uint32_t)KT : p.k_type, vt = VT >= 0 ? (uint32_t)VT : p.v_type;
    const uint32_t krow = kv_row_bytes(kt, kv_dim), vrow = kv_row_bytes(vt, kv_dim);
    pdl_wait();
    pdl_launch_dependents();
    uint32_t lo, n;
    key_range(p, replay_pos, lo, n);
    const uint32_t keys_per_split = split_keys(n, n_splits), used = (n + keys_per_split - 1) / keys_per_split;
    if (blockIdx.y >= used) return;  // past the position: nothing to read
    // key lo + j at ring row ring_add(lo_row, j) (n <= the cache's rows,
    // launch_attention checks: the span wraps at most once)
    const uint32_t lo_row = kv_ring_row(lo, p.max_ctx);
    const ScoreMap score = score_map(p.scale, p.softcap, kLog2e);  // exponentials base 2

    float qv[HG][8];
#pragma unroll
    for (int i = 0; i < HG; i++)
#pragma unroll
        for (int e = 0; e < 8; e++) qv[i][e] = kv_cache::round_f16(q[(size_t)(h0 + i) * HD + d0 + e]);
    __shared__ float sm[kStates][HG], sl[kStates][HG], sacc[kStates][HG][HD];
    const int state = warp * KPW + sub;

    {
        const uint32_t split = blockIdx.y;  // (gridDim.y == n_splits)
        const uint32_t j0 = split * keys_per_split, j1 = min(n, j0 + keys_per_split);
        float m[HG], l[HG], acc[HG][8];
#pragma unroll
        for (int i = 0; i < HG; i++) {
            m[i] = -INFINITY;
            l[i] = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[i][e] = 0.0f;
        }
        for (uint32_t jb = j0 + (uint32_t)warp * KPW * kUnroll; jb < j1; jb += kStep) {  // warp-uniform
            float kf[kUnroll][8], vf[kUnroll][8];
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {  // every load first, then the arithmetic
                const uint32_t j = jb + u * KPW + sub;
                if (j < j1) {
                    const size_t row = kv_cache::ring_add(lo_row, j, p.max_ctx);
                    kv_cache::load8(kt, kc + row * krow, kv_dim, koff, kf[u]);
                    kv_cache::load8(vt, vc + row * vrow, kv_dim, koff, vf[u]);
                } else {
#pragma unroll
                    for (int e = 0; e < 8; e++) kf[u][e] = vf[u][e] = 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                const bool valid = jb + u * KPW + sub < j1;
                float s[HG];
#pragma unroll
                for (int i = 0; i < HG; i++) {
                    s[i] = 0.0f;
#pragma unroll
                    for (int e = 0; e < 8; e++) s[i] += qv[i][e] * kf[u][e];
                }
#pragma unroll
                for (int o = L / 2; o > 0; o >>= 1)
#pragma unroll
                    for (int i = 0; i < HG; i++) s[i] += __shfl_xor_sync(0xffffffffu, s[i], o);
                if (!valid) continue;
#pragma unroll
                for (int i = 0; i < HG; i++) {
                    const float sc = score.cap(s[i]) * score.mul, mn = fmaxf(m[i], sc);
                    const float corr = exp2f(m[i] - mn), e = exp2f(sc - mn);
                    l[i] = l[i] * corr + e;
#pragma unroll
                    for (int k = 0; k < 8; k++) acc[i][k] = acc[i][k] * corr + e * vf[u][k];
                    m[i] = mn;
                }
            }
        }

        // The key groups of every warp meet in shared memory, then each
        // head's split result (unnormalized sums, max, sum) goes to the workspace.
#pragma unroll
        for (int i = 0; i < HG; i++) {
            if (lane % L == 0) {
                sm[state][i] = m[i];
                sl[state][i] = l[i];
            }
#pragma unroll
            for (int e = 0; e < 8; e++) sacc[state][i][d0 + e] = acc[i][e];
        }
        __syncthreads();
        for (uint32_t x = threadIdx.x; x < (uint32_t)HG * HD; x += blockDim.x) {
            const uint32_t i = x / HD, d = x % HD;
            float bm = -INFINITY;
            for (int st = 0; st < kStates; st++) bm = fmaxf(bm, sm[st][i]);
            float v = 0.0f, bl = 0.0f;
            for (int st = 0; st < kStates; st++) {
                const float w = sm[st][i] == -INFINITY ? 0.0f : exp2f(sm[st][i] - bm);
                v += sacc[st][i][d] * w;
                bl += sl[st][i] * w;
            }
            float* slot = partials + ((size_t)(h0 + i) * n_splits + split) * (HD + 2);
            slot[d] = v;
            if (d == 0) {
                slot[HD] = bm;
                slot[HD + 1] = bl;
            }
        }
    }
}

// out[h] = the splits' sums, rescaled to one max, over their summed weights;
// only the splits that hold keys at this position. A block a head: its
// threads find the max and each split's weight together (shared memory), then
// kCombineThreads / HD threads a dimension sum interleaved splits. The head's
// sink (sinks, or nullptr) joins here, once, with the combined max and sum.
constexpr int kCombineThreads = 256;

template <int HD>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(AttentionParams p, uint32_t n_splits,
                   const float* __restrict__ partials, float* __restrict__ out, const uint32_t* replay_pos,
                   const float* __restrict__ sinks) {
    constexpr int G = kCombineThreads / HD;  // threads a dimension
    __shared__ float w[kMaxSplits], red[kCombineThreads];
    const uint32_t h = blockIdx.x, tid = threadIdx.x;
    pdl_wait();
    pdl_launch_dependents();
    uint32_t lo, n;
    key_range(p, replay_pos, lo, n);
    const uint32_t keys_per_split = split_keys(n, n_splits), used = (n + keys_per_split - 1) / keys_per_split;
    const float* base = partials + (size_t)h * n_splits * (HD + 2);
    float mx = -INFINITY;
    for (uint32_t s = tid; s < used; s += kCombineThreads) mx = fmaxf(mx, base[s * (HD + 2) + HD]);
    red[tid] = mx;
    __syncthreads();
    for (int o = kCombineThreads / 2; o > 0; o >>= 1) {
        if (tid < (uint32_t)o) red[tid] = fmaxf(red[tid], red[tid + o]);
        __syncthreads();
    }
    const float bm = red[0];
    __syncthreads();
    float lsum = 0.0f;
    for (uint32_t s = tid; s < used; s += kCombineThreads) {
        const float ws = exp2f(base[s * (HD + 2) + HD] - bm);  // (maxima in base 2)
        w[s] = ws;
        lsum += base[s * (HD + 2) + HD + 1] * ws;
    }
    red[tid] = lsum;
    __syncthreads();
    for (int o = kCombineThreads / 2; o > 0; o >>= 1) {
        if (tid < (uint32_t)o) red[tid] += red[tid + o];
        __syncthreads();
    }
    float bl = red[0];
    __syncthreads();
    const float c = sink_factor<true>(sinks, h, bm, bl);  // (maxima in base 2)
    const uint32_t d = tid % HD, g = tid / HD;
    float v = 0.0f;
#pragma unroll 4
    for (uint32_t s = g; s < used; s += G) v += base[s * (HD + 2) + d] * w[s];
    red[tid] = v;
    __syncthreads();
    if (g == 0) {
        for (int k = 1; k < G; k++) v += red[k * HD + d];
        out[(size_t)h * HD + d] = v * c / bl;
    }
}

inline bool takes(const AttentionParams& p) {
    return (p.k_type != kKvF16 || p.v_type != kKvF16) && p.n_tokens == 1 && p.causal && !p.segmented &&
           !p.n_keys && p.n_kv_heads != 0 && p.n_heads % p.n_kv_heads == 0 &&
           (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256);
}

template <int HD, int HG, int KT, int VT>
void launch_types(const CudaArgs& a, const AttentionParams& p, uint32_t fit, float* partials) {
    const uint32_t blocks_a_split = p.n_kv_heads * (p.n_heads / p.n_kv_heads / HG);
    // about four blocks an SM, a split each
    const uint32_t n_splits = std::clamp<uint32_t>(4u * (uint32_t)a.tuning->sm_count / blocks_a_split, 1, fit);
    const dim3 grid(blocks_a_split, n_splits);
    launch_pdl(split_kernel<HD, HG, KT, VT>, grid, kWarps * 32, 0, a, p, n_splits, a.b<float>(0), a.b<uint8_t>(1),
               a.b<uint8_t>(2), partials, a.replay_pos);
    launch_pdl(combine_kernel<HD>, p.n_heads, kCombineThreads, 0, a, p, n_splits, (const float*)partials,
               a.b<float>(3), a.replay_pos, p.sinks ? (const float*)a.b<float>(7) : nullptr);
}

// One type for K and V (the usual -ctk / -ctv) gets its own kernel; a mixed
// pair reads the types from the parameters.
template <int HD, int HG>
void launch_for(const CudaArgs& a, const AttentionParams& p, uint32_t fit, float* partials) {
    if (p.k_type == p.v_type) {
        switch (p.k_type) {
            case kKvQ8_0: return launch_types<HD, HG, kKvQ8_0, kKvQ8_0>(a, p, fit, partials);
            case kKvQ4_0: return launch_types<HD, HG, kKvQ4_0, kKvQ4_0>(a, p, fit, partials);
            case kKvBF16: return launch_types<HD, HG, kKvBF16, kKvBF16>(a, p, fit, partials);
            default: break;
        }
    }
    launch_types<HD, HG, -1, -1>(a, p, fit, partials);
}

template <int HD>
void launch_heads(const CudaArgs& a, const AttentionParams& p, uint32_t fit, float* partials) {
    const uint32_t group = p.n_heads / p.n_kv_heads;
    if (group % 8 == 0) return launch_for<HD, 8>(a, p, fit, partials);
    if (group % 4 == 0) return launch_for<HD, 4>(a, p, fit, partials);
    if (group % 2 == 0) return launch_for<HD, 2>(a, p, fit, partials);
    launch_for<HD, 1>(a, p, fit, partials);
}

// Launches the kernels and returns true when takes(p); false leaves the pass
// to the other kernels.
inline bool launch(const CudaArgs& a, const AttentionParams& p) {
    if (!takes(p)) return false;
    // (partials after the workspace's counters, which the F16 split kernels count in)
    const size_t split_bytes = (size_t)p.n_heads * (p.head_dim + 2) * 4;
    const uint32_t fit = (uint32_t)std::min<size_t>(kMaxSplits, (a.workspace_bytes - kWorkspaceCounterBytes) / split_bytes);
    if (fit == 0) throw Error("CUDA attention: the decode workspace cannot hold one split a head");
    float* partials = reinterpret_cast<float*>(a.workspace + kWorkspaceCounterBytes);
    switch (p.head_dim) {
        case 64: launch_heads<64>(a, p, fit, partials); break;
        case 128: launch_heads<128>(a, p, fit, partials); break;
        default: launch_heads<256>(a, p, fit, partials); break;
    }
    return true;
}

}  // namespace attention_decode_kv
}  // namespace akunu
