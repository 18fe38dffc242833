// Token selection on the GPU: argmax per row and the sampler, with the
// meaning of backend/cpu/kernels/sampling.cpp (bias, penalties, mask, then
// temperature, top_k, top_p, min_p and an exact draw from the (seed, position)
// counter-based RNG). First version: the draw runs on one thread.
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

// Candidate order: logit descending, id ascending.
__device__ bool before(const float* z, int32_t x, int32_t y) { return z[x] > z[y] || (z[x] == z[y] && x < y); }

// Heap sort of idx[0..n) into candidate order, best first (single thread):
// a heap whose root is the candidate that sorts last, popped to the end.
__device__ void sort_candidates(const float* z, int32_t* idx, uint32_t n) {
    auto sift = [&](uint32_t root, uint32_t len) {
        for (;;) {
            uint32_t child = 2 * root + 1;
            if (child >= len) return;
            if (child + 1 < len && before(z, idx[child], idx[child + 1])) child++;
            if (!before(z, idx[root], idx[child])) return;
            int32_t tmp = idx[root];
            idx[root] = idx[child];
            idx[child] = tmp;
            root = child;
        }
    };
    for (uint32_t i = n / 2; i-- > 0;) sift(i, n);
    for (uint32_t end = n; end-- > 1;) {
        int32_t tmp = idx[0];
        idx[0] = idx[end];
        idx[end] = tmp;
        sift(0, end);
    }
}

__device__ uint32_t top_k_scan(const float* z, uint32_t vocab, uint32_t k, int32_t* idx) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        const float v = z[i];
        if (!(v > -INFINITY)) continue;
        if (n == k && !(v > z[idx[k - 1]])) continue;
        uint32_t j = n < k ? n++ : k - 1;
        while (j > 0 && v > z[idx[j - 1]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = (int32_t)i;
    }
    return n;
}

__device__ uint32_t draw(const SampleParams& p, const float* z, int32_t* idx, double u) {
    uint32_t n = 0;
    if (p.top_k > 0 && p.top_k <= 256 && (size_t)p.top_k * 64 < p.vocab) {
        n = top_k_scan(z, p.vocab, p.top_k, idx);
    } else {
        for (uint32_t i = 0; i < p.vocab; i++)
            if (z[i] > -INFINITY) idx[n++] = (int32_t)i;
        if (p.top_k > 0 && p.top_k < n) {
            sort_candidates(z, idx, n);
            n = p.top_k;
        }
    }
    if (n == 0) return 0;
    float zmax = z[idx[0]];
    for (uint32_t i = 1; i < n; i++) zmax = fmaxf(zmax, z[idx[i]]);
    const double inv_t = 1.0 / (double)p.temperature;
    auto weight = [&](int32_t i) { return exp(((double)z[i] - zmax) * inv_t); };
    double total = 0;
    for (uint32_t i = 0; i < n; i++) total += weight(idx[i]);
    if (p.top_p < 1.0f) {
        sort_candidates(z, idx, n);
        const double target = (double)p.top_p * total;
        double cum = 0;
        uint32_t keep = 0;
        while (keep < n && cum < target) cum += weight(idx[keep++]);
        n = keep;
    }
    if (p.min_p > 0.0f) {
        uint32_t kept = 0;
        for (uint32_t i = 0; i < n; i++)
            if (weight(idx[i]) >= (double)p.min_p) idx[kept++] = idx[i];
        n = kept;
    }
    total = 0;
    for (uint32_t i = 0; i < n; i++) total += weight(idx[i]);
    double r = u * total, acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += weight(idx[i]);
        if (r < acc) return (uint32_t)idx[i];
    }
    return (uint32_t)idx[n - 1];
}

__global__ void sample_kernel(SampleParams p, const float* logits, int32_t* out, int32_t* history,
                              const int32_t* bias, const uint32_t* mask, float* z) {
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
        if (pen) {  // llama.cpp's penalties, as the CPU twin
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
    __shared__ int tok;
    if (p.temperature <= 0.0f) {
        row_argmax(z, p.vocab, &tok);
    } else if (threadIdx.x == 0) {
        uint64_t seed = ((uint64_t)p.seed_hi << 32) | p.seed_lo;
        tok = (int)draw(p, z, ints, uniform_at(seed, p.pos0));
    }
    __syncthreads();
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
