// Token selection on the GPU: argmax per row and the sampler, with the
// meaning of backend/cpu/kernels/sampling.cpp (bias, penalties, mask, then
// temperature, top_k, top_p, min_p and an exact draw from the (seed, position)
// counter-based RNG). One thread block: top-k and top-p are cuts in the
// candidate order found by radix selection (8 bits a pass) on the logit's bits, and the
// draw is an inverse CDF over per-warp chunk sums and warp scans, all in parallel.
#include <cfloat>
#include <cmath>

#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {
namespace {

constexpr int kThreads = 1024;

// (value, index) maximum over the block, first index on ties.
__device__ void block_argmax(float v, int i, float* sv, int* si, int* out_index) {
    sv[threadIdx.x] = v;
    si[threadIdx.x] = i;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float ov = sv[threadIdx.x + s];
            int oi = si[threadIdx.x + s];
            if (ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < si[threadIdx.x])) {
                sv[threadIdx.x] = ov;
                si[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *out_index = si[0];
    __syncthreads();
}

__device__ void row_argmax(const float* l, uint32_t vocab, int* out_index) {
    __shared__ float sv[kThreads];
    __shared__ int si[kThreads];
    float best = -INFINITY;
    int bi = 0x7fffffff;  // no element yet: loses every comparison
    for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x)
        if (bi == 0x7fffffff || l[i] > best) {
            best = l[i];
            bi = (int)i;
        }
    block_argmax(best, bi, sv, si, out_index);
}

__global__ void argmax_kernel(ArgmaxParams p, const float* logits, int32_t* out) {
    __shared__ int result;
    row_argmax(logits + (size_t)(p.row + blockIdx.x) * p.vocab, p.vocab, &result);
    if (threadIdx.x == 0) out[blockIdx.x] = result;
}

void launch_argmax(const CudaArgs& a) {
    ArgmaxParams p = a.p<ArgmaxParams>();
    argmax_kernel<<<p.n_rows, kThreads, 0, a.stream>>>(p, a.b<float>(0), a.b<int32_t>(1));
}

__device__ uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

__device__ double uniform_at(uint64_t seed, uint32_t pos) {
    uint64_t x = splitmix64(seed ^ splitmix64(0xA0761D6478BD642Full + pos));
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

// A float's position in the order of values, as an unsigned key (larger float, larger key).
__device__ uint32_t order_key(float f) {
    const uint32_t b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The candidates kept so far: a prefix of the order (logit descending, id
// ascending), i.e. key > k, or key == k and id <= id.
struct Cut {
    uint32_t key, id;
    __device__ bool keeps(uint32_t k, uint32_t i) const { return k > key || (k == key && i <= id); }
};

// Adds m to hist[bucket] (bucket 256: nothing). Most candidates share the
// high bits of their logit, so in early radix passes whole warps hit one
// bucket: they add as one (a shuffle tree, then one atomic) instead of 32
// serialized shared-memory double atomics, which made top-k / top-p cost
// 40% of decode throughput on the H100.
__device__ void warp_hist_add(double* hist, uint32_t bucket, double m) {
    const unsigned peers = __match_any_sync(0xffffffffu, bucket);
    if (peers == 0xffffffffu) {
        for (int o = 16; o > 0; o >>= 1) m += __shfl_xor_sync(0xffffffffu, m, o);
        if ((threadIdx.x & 31) == 0 && bucket < 256) atomicAdd(&hist[bucket], m);
    } else if (bucket < 256) {
        atomicAdd(&hist[bucket], m);
    }
}

struct Sampler {
    const SampleParams& p;
    const float* z;
    const float* w;  // exp((z - zmax) / T), computed once
    double* red;     // shared, kThreads
    __device__ bool finite(uint32_t i) const { return z[i] > -INFINITY; }
    __device__ double weight(uint32_t i) const { return (double)w[i]; }
    __device__ double measure(uint32_t i, bool by_mass) const { return by_mass ? weight(i) : 1.0; }

    __device__ double block_sum(double v) const {
        red[threadIdx.x] = v;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        const double r = red[0];
        __syncthreads();
        return r;
    }

    // Sum of the measure over the candidates `pred` accepts (all threads get it).
    template <class Pred>
    __device__ double total(Pred pred, bool by_mass) const {
        double acc = 0;
        for (uint32_t i = threadIdx.x; i < p.vocab; i += blockDim.x)
            if (pred(i)) acc += measure(i, by_mass);
        return block_sum(acc);
    }

    // In index order, the smallest id whose running sum of the measure over
    // `pred` reaches `need` (>=), or with `strict` exceeds it (>, the draw's
    // inverse CDF). Each warp sums a contiguous chunk (coalesced); the warp
    // whose chunk holds the crossing walks it 32 ids at a time with a warp
    // scan, so the order is exact, not a race.
    template <class Pred>
    __device__ uint32_t id_reaching(Pred pred, bool by_mass, double need, uint32_t* out, bool strict = false) const {
        __shared__ double warp_total[32];
        const uint32_t n_warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        const uint32_t chunk = ((p.vocab + n_warps - 1) / n_warps + 31) / 32 * 32;
        const uint32_t lo = min(p.vocab, warp * chunk), hi = min(p.vocab, lo + chunk);
        double mine = 0;
        for (uint32_t i = lo + lane; i < hi; i += 32)
            if (pred(i)) mine += measure(i, by_mass);
        for (int o = 16; o > 0; o >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, o);
        if (lane == 0) warp_total[warp] = mine;
        if (threadIdx.x == 0) *out = 0xffffffffu;
        __syncthreads();
        double run = 0;
        for (uint32_t w = 0; w < warp; w++) run += warp_total[w];
        auto reached = [&](double v) { return strict ? v > need : v >= need; };
        if (!reached(run) && reached(run + mine)) {  // uniform across the warp
            for (uint32_t base = lo; base < hi; base += 32) {
                const uint32_t i = base + lane;
                const bool in = i < hi && pred(i);
                double x = in ? measure(i, by_mass) : 0.0;
                for (int o = 1; o < 32; o <<= 1) {
                    const double y = __shfl_up_sync(0xffffffffu, x, o);
                    if ((int)lane >= o) x += y;
                }
                const unsigned hit = __ballot_sync(0xffffffffu, in && reached(run + x));
                if (hit) {
                    if ((int)lane == __ffs(hit) - 1) *out = i;
                    break;
                }
                run += __shfl_sync(0xffffffffu, x, 31);
            }
        }
        __syncthreads();
        uint32_t r = *out;
        __syncthreads();
        if (r == 0xffffffffu) {  // rounding left `need` just out of reach: the last kept candidate
            if (threadIdx.x == 0) *out = 0;
            __syncthreads();
            for (uint32_t i = threadIdx.x; i < p.vocab; i += blockDim.x)
                if (pred(i)) atomicMax(out, i);
            __syncthreads();
            r = *out;
            __syncthreads();
        }
        return r;
    }

    // The shortest prefix of `base` (in candidate order) whose measure reaches
    // target: radix selection of the cut's key, 8 bits per pass (histograms of
    // the measure in shared memory), then the cut's id among equal keys.
    __device__ Cut shortest_prefix(Cut base, double target, bool by_mass, uint32_t* scratch, double* hist) const {
        uint32_t prefix = 0, decided = 0;
        double above = 0;  // measure of the candidates whose key is above every key still in play
        __shared__ uint32_t chosen;
        __shared__ double chosen_above;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
            __syncthreads();
            // the same trip count for every thread, so whole warps meet in warp_hist_add
            for (uint32_t i0 = 0; i0 < p.vocab; i0 += blockDim.x) {
                const uint32_t i = i0 + threadIdx.x;
                uint32_t bucket = 256;  // none
                double m = 0;
                if (i < p.vocab && finite(i)) {
                    const uint32_t k = order_key(z[i]);
                    if (base.keeps(k, i) && (k & decided) == prefix) {
                        bucket = (k >> shift) & 255u;
                        m = measure(i, by_mass);
                    }
                }
                warp_hist_add(hist, bucket, m);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                double run = above;
                uint32_t pick = 0xffffffffu, lowest = 0;
                for (int d = 255; d >= 0; d--) {
                    if (hist[d] == 0) continue;
                    lowest = (uint32_t)d;
                    if (run + hist[d] >= target) {
                        pick = (uint32_t)d;
                        break;
                    }
                    run += hist[d];
                }
                if (pick == 0xffffffffu) {  // rounding left the target just out of reach: the last bucket
                    pick = lowest;
                    run -= hist[lowest];
                }
                chosen = pick;
                chosen_above = run;
            }
            __syncthreads();
            prefix |= chosen << shift;
            decided |= 0xffu << shift;
            above = chosen_above;
            __syncthreads();
        }
        const uint32_t id = id_reaching([&](uint32_t i) {
            return finite(i) && order_key(z[i]) == prefix && base.keeps(prefix, i);
        }, by_mass, target - above, scratch);
        return Cut{prefix, id};
    }
};

__global__ void sample_kernel(SampleParams p, const float* logits, int32_t* out, int32_t* history,
                              const int32_t* bias, const uint32_t* mask, float* z) {
    __shared__ double red[kThreads];
    __shared__ double hist[256];
    __shared__ uint32_t scratch;
    __shared__ int tok;
    int32_t* ints = reinterpret_cast<int32_t*>(z + p.vocab);
    for (uint32_t i = threadIdx.x; i < p.vocab; i += blockDim.x) z[i] = logits[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        for (uint32_t i = 0; i < p.n_bias; i++) {
            int32_t id = bias[2 * i];
            float v = __int_as_float(bias[2 * i + 1]);
            if ((uint32_t)id < p.vocab) z[id] += v;
        }
        const bool pen = p.penalty_window > 0 && (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f ||
                                                  p.frequency_penalty != 0.0f);
        if (pen) {  // llama.cpp's penalties, as the CPU twin (the window is short: one thread)
            uint32_t n = min(p.penalty_window, p.pos0 + 1);
            const int32_t* h = history + (p.pos0 + 1 - n);
            for (uint32_t i = 0; i < n; i++) if ((uint32_t)h[i] < p.vocab) ints[h[i]] = 0;
            for (uint32_t i = 0; i < n; i++) if ((uint32_t)h[i] < p.vocab) ints[h[i]]++;
            for (uint32_t i = 0; i < n; i++) {
                int32_t t = h[i];
                if ((uint32_t)t >= p.vocab || ints[t] == 0) continue;
                float v = z[t];
                v = v <= 0.0f ? v * p.repeat_penalty : v / p.repeat_penalty;
                z[t] = v - ((float)ints[t] * p.frequency_penalty + p.presence_penalty);
                ints[t] = 0;
            }
        }
    }
    __syncthreads();
    if (p.use_mask)
        for (uint32_t i = threadIdx.x; i < p.vocab; i += blockDim.x)
            if (!((mask[i >> 5] >> (i & 31)) & 1u)) z[i] = -INFINITY;
    __syncthreads();
    // the best candidate (argmax, first on ties): the greedy answer and the softmax's anchor
    row_argmax(z, p.vocab, &tok);
    if (p.temperature > 0.0f && z[tok] > -INFINITY) {
        // weights once, in the work buffer's second half (the penalties' counts are done with it)
        float* w = reinterpret_cast<float*>(ints);
        const float zmax = z[tok], inv_t = 1.0f / p.temperature;
        for (uint32_t i = threadIdx.x; i < p.vocab; i += blockDim.x)
            w[i] = z[i] > -INFINITY ? expf((z[i] - zmax) * inv_t) : 0.0f;
        __syncthreads();
        Sampler s{p, z, w, red};
        Cut cut{0u, 0xffffffffu};  // every finite candidate
        const double n_finite = s.total([&](uint32_t i) { return s.finite(i); }, false);
        if (p.top_k > 0 && (double)p.top_k < n_finite) cut = s.shortest_prefix(cut, (double)p.top_k, false, &scratch, hist);
        if (p.top_p < 1.0f) {
            const double mass = s.total([&](uint32_t i) { return s.finite(i) && cut.keeps(order_key(z[i]), i); }, true);
            cut = s.shortest_prefix(cut, (double)p.top_p * mass, true, &scratch, hist);
        }
        const double min_w = (double)p.min_p;  // weights are relative to the best candidate's 1
        auto kept = [&](uint32_t i) {
            return s.finite(i) && cut.keeps(order_key(z[i]), i) && (min_w <= 0.0 || s.weight(i) >= min_w);
        };
        const double mass = s.total(kept, true);
        const uint64_t seed = ((uint64_t)p.seed_hi << 32) | p.seed_lo;
        const uint32_t pick = s.id_reaching(kept, true, uniform_at(seed, p.pos0) * mass, &scratch, true);
        if (threadIdx.x == 0) tok = (int)pick;
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = tok;
        history[p.pos0 + 1] = tok;
    }
}

void launch_sample(const CudaArgs& a) {
    SampleParams p = a.p<SampleParams>();
    sample_kernel<<<1, kThreads, 0, a.stream>>>(p, a.b<float>(0), a.b<int32_t>(1), a.b<int32_t>(2),
                                                a.b<int32_t>(3), a.b<uint32_t>(4), a.b<float>(5));
}

}  // namespace

extern const CudaKernelEntry kCudaSamplingKernels[] = {
    {"argmax", launch_argmax},
    {"sample", launch_sample},
    {nullptr, nullptr},
};

}  // namespace akunu
