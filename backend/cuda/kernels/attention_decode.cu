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
#include "attention_decode.h"

#include <algorithm>
#include <cfloat>

#include "core/half.h"

namespace akunu {
namespace {

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

// Grid (n_heads, n_splits), kWarps warps per block; lanes hold D dims each.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_kernel(AttentionParams p, uint32_t n_splits, const float* q, const uint16_t* kc,
                            const uint16_t* vc, float* out, float* partials, uint32_t* counters,
                            const uint32_t* replay_pos) {
    const uint32_t h = blockIdx.x, split = blockIdx.y;
    const uint32_t pos = replay_position(replay_pos, p.pos0);
    const uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const uint32_t n = pos + 1 - lo;
    const uint32_t chunk = max(kMinKeysPerSplit, (n + n_splits - 1) / n_splits);
    const uint32_t j0 = split * chunk, j1 = min(n, j0 + chunk);  // keys [j0, j1) after lo
    const uint32_t kv_dim = p.n_kv_heads * p.head_dim;
    const size_t koff = (size_t)(h / (p.n_heads / p.n_kv_heads)) * p.head_dim;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // Splits past the keys exit at once; the rest combine only when there are several.
    const uint32_t used = min(n_splits, (n + chunk - 1) / chunk);
    pdl_wait();
    pdl_launch_dependents();
    if (split >= used) return;

    float qv[D];
    const float* qsrc = q + (size_t)h * p.head_dim + lane * D;
#pragma unroll
    for (int d = 0; d < D; d++) qv[d] = f16_to_f32(f32_to_f16(qsrc[d]));

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
                const size_t at = (size_t)(lo + jb + u) * kv_dim + koff + lane * D;
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
            s[u] *= p.scale;
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
    float bm = -FLT_MAX;
    for (int w = 0; w < kWarps; w++) bm = fmaxf(bm, wm[w]);
    float bl = 0.0f;
    for (int w = 0; w < kWarps; w++) bl += wl[w] * expf(wm[w] - bm);

    if (used == 1) {
        for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < kWarps; w++) v += wacc[w][d] * expf(wm[w] - bm);
            out[(size_t)h * p.head_dim + d] = v / bl;
        }
        return;
    }
    const SplitSlot mine{partials + ((size_t)h * n_splits + split) * (p.head_dim + 2), p.head_dim};
    for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; w++) v += wacc[w][d] * expf(wm[w] - bm);
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
    for (uint32_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
        float v = 0.0f;
        for (uint32_t s = 0; s < used; s++) {
            const float* slot = partials + ((size_t)h * n_splits + s) * (p.head_dim + 2);
            v += __ldcg(&slot[d]) * expf(__ldcg(&slot[p.head_dim]) - gm);
        }
        out[(size_t)h * p.head_dim + d] = v / gl;
    }
    if (threadIdx.x == 0) counters[h] = 0;  // ready for the next layer
}

}  // namespace

bool launch_attention_decode(const CudaArgs& a, const AttentionParams& p) {
    const uint32_t dims_per_lane = p.head_dim / 32;
    if (p.n_tokens != 1 || !p.causal || p.segmented || p.n_keys || p.head_dim % 32 != 0 ||
        (dims_per_lane != 1 && dims_per_lane != 2 && dims_per_lane != 4 && dims_per_lane != 8))
        return false;
    if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads != 0) return false;
    // Split count from the cache size (never the position), halved until the
    // partials fit the workspace after the per-head counters.
    const uint32_t span = p.window ? std::min(p.window, p.max_ctx) : p.max_ctx;
    uint32_t n_splits = std::clamp<uint32_t>((span + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, kMaxSplits);
    const size_t partials_at = ((size_t)p.n_heads * 4 + 255) / 256 * 256;
    auto fits = [&](uint32_t s) { return partials_at + (size_t)p.n_heads * s * (p.head_dim + 2) * 4 <= a.workspace_bytes; };
    while (n_splits > 1 && !fits(n_splits)) n_splits /= 2;
    uint32_t* counters = reinterpret_cast<uint32_t*>(a.workspace);
    float* partials = reinterpret_cast<float*>(a.workspace + partials_at);
    const dim3 grid(p.n_heads, n_splits);
    const float* q = a.b<float>(0);
    const uint16_t* kc = a.b<uint16_t>(1);
    const uint16_t* vc = a.b<uint16_t>(2);
    float* out = a.b<float>(3);
    switch (dims_per_lane) {
        case 1: launch_pdl(attention_decode_kernel<1>, grid, kWarps * 32, 0, a.stream, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos); break;
        case 2: launch_pdl(attention_decode_kernel<2>, grid, kWarps * 32, 0, a.stream, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos); break;
        case 4: launch_pdl(attention_decode_kernel<4>, grid, kWarps * 32, 0, a.stream, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos); break;
        case 8: launch_pdl(attention_decode_kernel<8>, grid, kWarps * 32, 0, a.stream, p, n_splits, q, kc, vc, out, partials, counters, a.replay_pos); break;
        default: return false;
    }
    return true;
}

}  // namespace akunu
