// Token selection on the GPU: argmax per row and the sampler, with the
// meaning of backend/cpu/kernels/sampling.cpp (bias, penalties, mask, then
// temperature, top_k, top_p, min_p and an exact draw from the (seed, position)
// counter-based RNG). The sampler is a sequence of grid and one-block kernels
// (see "The sampler runs as ..." below).
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>

#include "cache/sampler_buffers.h"

#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "device_math.cuh"

namespace akunu {
namespace {

// (value, index) maximum, first index on ties; index INT_MAX: none yet
__device__ bool better(float v, int i, float bv, int bi) { return bi == INT_MAX || v > bv || (v == bv && i < bi); }

__device__ void block_argmax(float& v, int& i) {
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (oi != INT_MAX && better(ov, oi, v, i)) { v = ov; i = oi; }
    }
    if (threadIdx.x % 32 == 0) { sv[threadIdx.x / 32] = v; si[threadIdx.x / 32] = i; }
    __syncthreads();
    v = -INFINITY;
    i = INT_MAX;
    for (unsigned k = 0; k < blockDim.x / 32; k++)
        if (si[k] != INT_MAX && better(sv[k], si[k], v, i)) { v = sv[k]; i = si[k]; }
    __syncthreads();
}

// Grid (parts, rows): part x of a row takes every parts-th stretch of
// blockDim values; with several parts each leaves its (value, index) in the
// workspace and the last of a row to finish reduces them in part order (the
// first index still wins ties). One block reading a 150k vocabulary alone
// would take longer than the LM head's GEMV before it.
__global__ void argmax_kernel(ArgmaxParams p, const float* logits, int32_t* out, const uint32_t* replay_token,
                              float2* partials, uint32_t* counters) {
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t row = blockIdx.y, parts = gridDim.x;
    const float* l = logits + (size_t)(p.row + row) * p.vocab;
    float v = -INFINITY;
    int bi = INT_MAX;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.vocab; i += parts * blockDim.x)
        if (better(l[i], (int)i, v, bi)) { v = l[i]; bi = (int)i; }
    block_argmax(v, bi);
    if (parts > 1) {
        __shared__ bool is_last;
        if (threadIdx.x == 0) {
            partials[(size_t)row * parts + blockIdx.x] = make_float2(v, __int_as_float(bi));
            __threadfence();  // the partial is visible before it is counted
            is_last = atomicAdd(&counters[row], 1u) == parts - 1;
        }
        __syncthreads();
        if (!is_last) return;
        __threadfence();
        v = -INFINITY;
        bi = INT_MAX;
        if (threadIdx.x < parts) {
            const float2 e = __ldcg(&partials[(size_t)row * parts + threadIdx.x]);
            v = e.x;
            bi = __float_as_int(e.y);
        }
        block_argmax(v, bi);
        if (threadIdx.x == 0) counters[row] = 0;  // ready for the next launch
    }
    if (threadIdx.x == 0) replay_slot(out, replay_token)[row] = bi;
}

// Threads of an argmax block: a 256-thread block's reduction (8 warps) is
// shorter than a 1024-thread one's; more blocks make up the loads.
constexpr int kArgmaxThreads = 256;

void launch_argmax(const CudaArgs& a) {
    ArgmaxParams p = a.p<ArgmaxParams>();
    // Parts per row: about one block per 1k logits, at most kArgmaxThreads
    // (the final reduction's one value per thread), when the workspace holds them.
    uint32_t parts = std::min<uint32_t>(kArgmaxThreads, std::max<uint32_t>(1, p.vocab / 1024));
    const size_t partials_at = kWorkspaceCounterBytes;  // after every kernel's counters
    if (!a.workspace || (size_t)p.n_rows * sizeof(uint32_t) > kWorkspaceCounterBytes || partials_at + (size_t)p.n_rows * parts * sizeof(float2) > a.workspace_bytes) parts = 1;
    launch_pdl(argmax_kernel, dim3(parts, p.n_rows), kArgmaxThreads, 0, a, p, a.b<float>(0), a.b<int32_t>(1),
               a.replay_token, reinterpret_cast<float2*>(a.workspace + partials_at),
               reinterpret_cast<uint32_t*>(a.workspace));
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

// ---------------------------------------------------------------------------------------------
// The sampler runs as a short sequence of kernels over the whole GPU (one
// block on one SM made top-p sampling cost 40% of decode throughput): grid
// kernels stream the vocabulary and leave per-block partials, one-block
// kernels combine them and decide. Their shared state lives in the work
// buffer after the processed logits and the weights (SamplerBuffers).
//
// Candidates are ordered by logit (descending), then id (ascending); top-k and
// top-p keep a prefix of that order, the "cut": key > cut_key, or key ==
// cut_key and id <= cut_id. Each cut is found by radix selection on the
// logit's order key, 8 bits a pass (histograms of the count or mass), then
// the cut's id among equal keys by an ordered prefix sum. The draw is an
// inverse CDF over the kept mass in id order, from the (seed, position) RNG.
// Histogram counts and masses are 2^-40 fixed point in 64-bit integers: exact
// and independent of the order of the atomic adds.

constexpr int kGridThreads = 256;
constexpr int kMaxGrid = 128;
constexpr double kFixedOne = 1099511627776.0;  // 2^40

struct SamplerState {
    unsigned long long hist[256];
    double partial[kMaxGrid];
    float part_max[kMaxGrid];
    int32_t part_arg[kMaxGrid];
    double target, above;
    float zmax;
    int32_t best;
    uint32_t cut_key, cut_id;  // the current cut (key 0, id ~0: every finite candidate)
    uint32_t prefix, decided;  // radix selection in progress
    int32_t sampling;          // 0: the argmax is the answer
    int32_t selecting;         // a radix selection is running (else its kernels return at once)
    uint32_t found;
};
static_assert(sizeof(SamplerState) <= SamplerBuffersScratchBytes, "sampler state exceeds its scratch");

enum class Mode { Select, Cut, Final };  // what a chunk sum / search measures

struct SampleArgs {
    SampleParams p;
    const float* logits;
    int32_t* out;
    int32_t* history;
    const int32_t* bias;
    const uint32_t* mask;
    float* z;   // processed logits
    float* w;   // weights exp((z - zmax) / T); int32 penalty counts before that
    SamplerState* st;
    uint32_t grid;
    const uint32_t* replay_pos;    // see CudaArgs
    const uint32_t* replay_token;

    __device__ uint32_t pos0() const { return replay_position(replay_pos, p.pos0); }
    __device__ int32_t* out_slot() const { return replay_slot(out, replay_token); }

    __device__ bool finite(uint32_t i) const { return z[i] > -INFINITY; }
    __device__ bool in_cut(uint32_t i) const {
        const uint32_t k = order_key(z[i]);
        return k > st->cut_key || (k == st->cut_key && i <= st->cut_id);
    }
    // the candidates a chunk sum counts, per mode
    __device__ bool counted(Mode m, uint32_t i) const {
        if (!finite(i) || !in_cut(i)) return false;
        if (m == Mode::Select) return order_key(z[i]) == st->prefix;  // the cut's key, all bits decided
        if (m == Mode::Final) return p.min_p <= 0.0f || w[i] >= p.min_p;
        return true;
    }
    __device__ double measure(bool by_mass, uint32_t i) const { return by_mass ? (double)w[i] : 1.0; }
    // contiguous chunk of block b (ordered prefix sums need contiguity)
    __device__ uint32_t chunk() const { return ((p.vocab + grid - 1) / grid + 31) / 32 * 32; }
};

// processed logits: copy, grammar mask
__global__ void sample_copy(SampleArgs a) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.p.vocab; i += gridDim.x * blockDim.x)
        a.z[i] = (a.p.use_mask && !((a.mask[i >> 5] >> (i & 31)) & 1u)) ? -INFINITY : a.logits[i];
}

// logit bias and llama.cpp's penalties (as the CPU twin; the window is short: one thread), state reset
__global__ void sample_adjust(SampleArgs a) {
    SamplerState* st = a.st;
    for (int d = threadIdx.x; d < 256; d += blockDim.x) st->hist[d] = 0;
    if (threadIdx.x != 0) return;
    const SampleParams& p = a.p;
    float* z = a.z;
    int32_t* ints = reinterpret_cast<int32_t*>(a.w);
    for (uint32_t i = 0; i < p.n_bias; i++) {
        int32_t id = a.bias[2 * i];
        float v = __int_as_float(a.bias[2 * i + 1]);
        if ((uint32_t)id < p.vocab) z[id] += v;
    }
    const bool pen = p.penalty_window > 0 && (p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f ||
                                              p.frequency_penalty != 0.0f);
    if (pen) {
        const uint32_t pos0 = a.pos0();
        uint32_t n = min(p.penalty_window, pos0 + 1);
        const int32_t* h = a.history + (pos0 + 1 - n);
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
    st->cut_key = 0;
    st->cut_id = 0xffffffffu;
    st->selecting = 0;
}

__global__ void sample_argmax_part(SampleArgs a) {
    float v = -INFINITY;
    int bi = INT_MAX;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.p.vocab; i += gridDim.x * blockDim.x)
        if (better(a.z[i], (int)i, v, bi)) { v = a.z[i]; bi = (int)i; }
    block_argmax(v, bi);
    if (threadIdx.x == 0) { a.st->part_max[blockIdx.x] = v; a.st->part_arg[blockIdx.x] = bi; }
}

__global__ void sample_argmax_final(SampleArgs a) {
    SamplerState* st = a.st;
    float v = -INFINITY;
    int bi = INT_MAX;
    for (uint32_t b = threadIdx.x; b < a.grid; b += blockDim.x)
        if (st->part_arg[b] != INT_MAX && better(st->part_max[b], st->part_arg[b], v, bi)) {
            v = st->part_max[b];
            bi = st->part_arg[b];
        }
    block_argmax(v, bi);
    if (threadIdx.x != 0) return;
    st->best = bi;
    st->zmax = v;
    st->sampling = a.p.temperature > 0.0f && v > -INFINITY;
    if (!st->sampling) {
        a.out_slot()[0] = bi;
        a.history[a.pos0() + 1] = bi;
    }
}

// weights relative to the best candidate, and the count of finite candidates per block
__global__ void sample_weights(SampleArgs a) {
    __shared__ double red[32];
    if (!a.st->sampling) return;
    const float zmax = a.st->zmax, inv_t = 1.0f / a.p.temperature;
    double n = 0;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < a.p.vocab; i += gridDim.x * blockDim.x) {
        const bool f = a.z[i] > -INFINITY;
        a.w[i] = f ? expf((a.z[i] - zmax) * inv_t) : 0.0f;
        n += f;
    }
    n = block_sum(n, red);
    if (threadIdx.x == 0) a.st->partial[blockIdx.x] = n;
}

// Sum of the measure over each block's contiguous chunk, for the candidates `mode` counts.
__global__ void sample_chunk_sums(SampleArgs a, Mode mode, bool by_mass) {
    __shared__ double red[32];
    if (!a.st->sampling || (mode == Mode::Select && !a.st->selecting)) return;
    const uint32_t c = a.chunk(), lo = min(a.p.vocab, blockIdx.x * c), hi = min(a.p.vocab, lo + c);
    double s = 0;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        if (a.counted(mode, i)) s += a.measure(by_mass, i);
    s = block_sum(s, red);
    if (threadIdx.x == 0) a.st->partial[blockIdx.x] = s;
}

// Starts a selection for the shortest prefix of the current cut whose count
// (top_k) or mass (top_p * the cut's mass) reaches the target. The partials
// hold the cut's count (after sample_weights) or mass (Mode::Cut sums).
__global__ void sample_begin_select(SampleArgs a, bool by_mass) {
    SamplerState* st = a.st;
    if (threadIdx.x != 0 || !st->sampling) return;
    double total = 0;
    for (uint32_t b = 0; b < a.grid; b++) total += st->partial[b];
    const double target = by_mass ? (double)a.p.top_p * total : (double)a.p.top_k;
    st->selecting = by_mass || target < total;  // top_k >= the finite candidates keeps them all
    st->target = target;
    st->above = 0;
    st->prefix = 0;
    st->decided = 0;
}

__device__ unsigned long long to_fixed(double m) { return (unsigned long long)(m * kFixedOne + 0.5); }

// Adds m to hist[bucket] (bucket 256: nothing); a warp whose lanes share one bucket adds once.
__device__ void warp_hist_add(unsigned long long* hist, uint32_t bucket, unsigned long long m) {
    const unsigned peers = __match_any_sync(0xffffffffu, bucket);
    if (peers == 0xffffffffu) {
        for (int o = 16; o > 0; o >>= 1) m += __shfl_xor_sync(0xffffffffu, m, o);
        if ((threadIdx.x & 31) == 0 && bucket < 256) atomicAdd(&hist[bucket], m);
    } else if (bucket < 256) {
        atomicAdd(&hist[bucket], m);
    }
}

// One radix pass: histogram of the measure by the key's byte at `shift`,
// over the cut's candidates whose decided bits match the prefix.
__global__ void sample_histogram(SampleArgs a, int shift, bool by_mass) {
    __shared__ unsigned long long hist[256];
    SamplerState* st = a.st;
    if (!st->sampling || !st->selecting) return;
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    const uint32_t prefix = st->prefix, decided = st->decided, stride = gridDim.x * blockDim.x;
    for (uint32_t i0 = blockIdx.x * blockDim.x; i0 < a.p.vocab; i0 += stride) {  // same trip count per block
        const uint32_t i = i0 + threadIdx.x;
        uint32_t bucket = 256;
        unsigned long long m = 0;
        if (i < a.p.vocab && a.finite(i) && a.in_cut(i)) {
            const uint32_t k = order_key(a.z[i]);
            if ((k & decided) == prefix) {
                bucket = (k >> shift) & 255u;
                m = to_fixed(a.measure(by_mass, i));
            }
        }
        warp_hist_add(hist, bucket, m);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < 256; d += blockDim.x)
        if (hist[d]) atomicAdd(&st->hist[d], hist[d]);
}

// Picks the byte at `shift`: the bucket where the running measure (from the
// largest keys down) reaches the target.
__global__ void sample_pick_bucket(SampleArgs a, int shift) {
    SamplerState* st = a.st;
    if (!st->sampling || !st->selecting) return;
    if (threadIdx.x == 0) {
        double run = st->above;
        uint32_t pick = 0xffffffffu, lowest = 0;
        for (int d = 255; d >= 0; d--) {
            if (st->hist[d] == 0) continue;
            const double h = (double)st->hist[d] / kFixedOne;
            lowest = (uint32_t)d;
            if (run + h >= st->target) {
                pick = (uint32_t)d;
                break;
            }
            run += h;
        }
        if (pick == 0xffffffffu) {  // rounding left the target just out of reach: the last bucket
            pick = lowest;
            run -= (double)st->hist[lowest] / kFixedOne;
        }
        st->prefix |= pick << shift;
        st->decided |= 0xffu << shift;
        st->above = run;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < 256; d += blockDim.x) st->hist[d] = 0;
}

// In id order, the first counted candidate whose running measure reaches
// `need` (Select: target - above, >=) or exceeds it (Final: u * total, >).
// The partials give each chunk's sum; one warp walks the crossing chunk 32
// ids at a time with a warp scan. Select narrows the cut; Final writes the token.
__global__ void sample_find(SampleArgs a, Mode mode, bool by_mass) {
    SamplerState* st = a.st;
    __shared__ uint32_t found;
    __shared__ double need_s, run_s;
    __shared__ int chunk_s;
    if (!st->sampling || (mode == Mode::Select && !st->selecting)) return;
    const bool strict = mode == Mode::Final;
    if (threadIdx.x == 0) {
        double total = 0;
        for (uint32_t b = 0; b < a.grid; b++) total += st->partial[b];
        const uint64_t seed = ((uint64_t)a.p.seed_hi << 32) | a.p.seed_lo;
        const double need = strict ? uniform_at(seed, a.pos0()) * total : st->target - st->above;
        double run = 0;
        int c = -1;
        for (uint32_t b = 0; b < a.grid; b++) {
            const double v = st->partial[b];
            if (v > 0 && (strict ? run + v > need : run + v >= need)) { c = (int)b; break; }
            run += v;
        }
        need_s = need;
        run_s = run;
        chunk_s = c;
        found = 0xffffffffu;
    }
    __syncthreads();
    if (chunk_s >= 0 && threadIdx.x < 32) {
        const uint32_t lane = threadIdx.x, cs = a.chunk();
        const uint32_t lo = min(a.p.vocab, (uint32_t)chunk_s * cs), hi = min(a.p.vocab, lo + cs);
        double run = run_s;
        const double need = need_s;
        for (uint32_t base = lo; base < hi; base += 32) {
            const uint32_t i = base + lane;
            const bool in = i < hi && a.counted(mode, i);
            double x = in ? a.measure(by_mass, i) : 0.0;
            for (int o = 1; o < 32; o <<= 1) {
                const double y = __shfl_up_sync(0xffffffffu, x, o);
                if ((int)lane >= o) x += y;
            }
            const unsigned hit = __ballot_sync(0xffffffffu, in && (strict ? run + x > need : run + x >= need));
            if (hit) {
                if ((int)lane == __ffs(hit) - 1) found = i;
                break;
            }
            run += __shfl_sync(0xffffffffu, x, 31);
        }
    }
    __syncthreads();
    if (found == 0xffffffffu) {  // rounding left `need` just out of reach: the last counted candidate
        if (threadIdx.x == 0) found = 0;
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < a.p.vocab; i += blockDim.x)
            if (a.counted(mode, i)) atomicMax(&found, i);
        __syncthreads();
    }
    if (threadIdx.x != 0) return;
    if (mode == Mode::Select) {
        st->cut_key = st->prefix;
        st->cut_id = found;
        st->selecting = 0;
    } else {
        a.out_slot()[0] = (int32_t)found;
        a.history[a.pos0() + 1] = (int32_t)found;
    }
}

void launch_sample(const CudaArgs& c) {
    SampleArgs a;
    a.p = c.p<SampleParams>();
    a.logits = c.b<float>(0);
    a.out = c.b<int32_t>(1);
    a.replay_pos = c.replay_pos;
    a.replay_token = c.replay_token;
    a.history = c.b<int32_t>(2);
    a.bias = c.b<int32_t>(3);
    a.mask = c.b<uint32_t>(4);
    a.z = c.b<float>(5);
    a.w = a.z + a.p.vocab;
    a.st = reinterpret_cast<SamplerState*>(c.b<uint8_t>(5) + (size_t)a.p.vocab * 8);
    a.grid = std::min<uint32_t>(kMaxGrid, blocks_for(a.p.vocab, kGridThreads * 8));
    const cudaStream_t s = c.stream;
    const unsigned g = a.grid, t = kGridThreads;
    sample_copy<<<g, t, 0, s>>>(a);
    sample_adjust<<<1, 32, 0, s>>>(a);
    sample_argmax_part<<<g, t, 0, s>>>(a);
    sample_argmax_final<<<1, kMaxGrid, 0, s>>>(a);
    if (a.p.temperature <= 0.0f) return;  // greedy over the processed logits: done
    sample_weights<<<g, t, 0, s>>>(a);
    // The filters on the host's view of the parameters: a kernel sequence per setting.
    auto select = [&](bool by_mass) {
        for (int shift = 24; shift >= 0; shift -= 8) {
            sample_histogram<<<g, t, 0, s>>>(a, shift, by_mass);
            sample_pick_bucket<<<1, 256, 0, s>>>(a, shift);
        }
        sample_chunk_sums<<<g, t, 0, s>>>(a, Mode::Select, by_mass);
        sample_find<<<1, 256, 0, s>>>(a, Mode::Select, by_mass);
    };
    if (a.p.top_k > 0) {
        sample_begin_select<<<1, 32, 0, s>>>(a, false);  // partials: the finite count (sample_weights)
        select(false);
    }
    if (a.p.top_p < 1.0f) {
        sample_chunk_sums<<<g, t, 0, s>>>(a, Mode::Cut, true);
        sample_begin_select<<<1, 32, 0, s>>>(a, true);
        select(true);
    }
    sample_chunk_sums<<<g, t, 0, s>>>(a, Mode::Final, true);
    sample_find<<<1, 256, 0, s>>>(a, Mode::Final, true);
}

}  // namespace

extern const CudaKernelEntry kCudaSamplingKernels[] = {
    {"argmax", launch_argmax, true},
    {"sample", launch_sample, true},
    {nullptr, nullptr},
};

}  // namespace akunu
