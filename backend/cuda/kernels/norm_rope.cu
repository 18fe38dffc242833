// RMSNorm, LayerNorm and RoPE with the CPU kernels' meaning
// (backend/cpu/kernels/norm_rope.cpp): one block per row for the norms (sums
// in double, as the CPU twin), one thread per rotated pair for RoPE (rope: the
// rows at consecutive positions; rope_rows: each row at its own position).
#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "device_math.cuh"

namespace akunu {
namespace {

// One block per row; the sum of squares in double (rms_scale), as the CPU twin.
__global__ void rmsnorm_kernel(NormParams p, const float* x, const float* w, float* y) {
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t row = blockIdx.x;
    const uint32_t t = row / p.rows_per_token, r = row % p.rows_per_token;
    const float* xr = x + (size_t)t * p.x_stride + (size_t)r * p.dim;
    float* yr = y + (size_t)t * p.y_stride + (size_t)r * p.dim;
    const float scale = rms_scale(xr, p.dim, p.eps);
    // Four values a thread loaded before any is stored (y may be x: each
    // value is read and written by the same thread).
    constexpr uint32_t kAtOnce = 4;
    for (uint32_t i0 = threadIdx.x; i0 < p.dim; i0 += kAtOnce * blockDim.x) {
        float v[kAtOnce], g[kAtOnce];
#pragma unroll
        for (uint32_t k = 0; k < kAtOnce; k++) {
            const uint32_t i = i0 + k * blockDim.x;
            v[k] = i < p.dim ? xr[i] : 0.0f;
            g[k] = i < p.dim ? w[i] : 0.0f;
        }
#pragma unroll
        for (uint32_t k = 0; k < kAtOnce; k++) {
            const uint32_t i = i0 + k * blockDim.x;
            if (i < p.dim) yr[i] = v[k] * scale * (g[k] + p.weight_offset);
        }
    }
}

void launch_rmsnorm(const CudaArgs& a) {
    NormParams p = a.p<NormParams>();
    const float* x = a.b<float>(0) + (size_t)p.row0 * p.x_stride;
    launch_pdl(rmsnorm_kernel, p.n_tokens * p.rows_per_token, 256, 0, a, p, x, a.b<float>(1), a.b<float>(2));
}

// LayerNorm with bias (BERT), one block per row, statistics in double as the CPU twin.
__global__ void layernorm_kernel(NormParams p, const float* x, const float* w, float* y, const float* b) {
    const uint32_t row = blockIdx.x;
    const uint32_t t = row / p.rows_per_token, r = row % p.rows_per_token;
    const float* xr = x + (size_t)t * p.x_stride + (size_t)r * p.dim;
    float* yr = y + (size_t)t * p.y_stride + (size_t)r * p.dim;
    __shared__ double partial[32];
    double s = 0;
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) s += xr[i];
    const double mean = block_sum(s, partial) / p.dim;
    double v = 0;
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) v += ((double)xr[i] - mean) * ((double)xr[i] - mean);
    v = block_sum(v, partial);
    const float scale = (float)(1.0 / sqrt(v / p.dim + (double)p.eps));
    const float m = (float)mean;
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) yr[i] = (xr[i] - m) * scale * w[i] + b[i];
}

void launch_layernorm(const CudaArgs& a) {
    NormParams p = a.p<NormParams>();
    const float* x = a.b<float>(0) + (size_t)p.row0 * p.x_stride;
    layernorm_kernel<<<p.n_tokens * p.rows_per_token, 256, 0, a.stream>>>(p, x, a.b<float>(1), a.b<float>(2),
                                                                         a.b<float>(3));
}

// One thread per pair of a head (rope_pair_at: device_math.cuh), cos and sin
// scaled by p.attn_factor (YaRN's magnitude; 1 otherwise). The position:
// each row's own from the (sequence, position) pairs of `rows` (rope_rows: a
// batch of sequences at their own positions), else pos0 + row, pos0 from the
// replay state inside a decode graph.
__global__ void rope_kernel(RopeParams p, float* x, const float* factors, const uint32_t* replay_pos,
                            const int32_t* rows) {
    const uint32_t half = p.head_dim / 2;
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t total = (size_t)p.n_tokens * p.n_heads * half;
    if (idx >= total) return;
    const uint32_t i = (uint32_t)(idx % half);
    const uint32_t h = (uint32_t)((idx / half) % p.n_heads);
    const uint32_t t = (uint32_t)(idx / ((size_t)half * p.n_heads));
    const float pos = rows ? (float)(uint32_t)rows[2 * (size_t)t + 1] : (float)(replay_position(replay_pos, p.pos0) + t);
    float* v = x + (size_t)t * p.row_stride + (size_t)h * p.head_dim;
    RopePair r = rope_pair_at(i, p.head_dim, p.neox != 0, pos, p.freq_scale, p.freq_base, factors);
    r.c *= p.attn_factor;
    r.s *= p.attn_factor;
    float x0 = v[r.i0], x1 = v[r.i1];
    rope_rotate(r, x0, x1);
    v[r.i0] = x0;
    v[r.i1] = x1;
}

void launch_rope_kernel(const CudaArgs& a, const int32_t* rows) {
    RopeParams p = a.p<RopeParams>();
    const size_t n = (size_t)p.n_tokens * p.n_heads * (p.head_dim / 2);
    if (n == 0) return;
    rope_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), p.has_freq_factors ? a.b<float>(1) : nullptr,
                                                          rows ? nullptr : a.replay_pos, rows);
}

void launch_rope(const CudaArgs& a) { launch_rope_kernel(a, nullptr); }

// rope with each row's position read from buffer 2; pos0 is unused.
void launch_rope_rows(const CudaArgs& a) { launch_rope_kernel(a, a.b<int32_t>(2)); }

}  // namespace

extern const CudaKernelEntry kCudaNormRopeKernels[] = {
    {"rmsnorm", launch_rmsnorm},
    {"rope", launch_rope, true},
    {"rope_rows", launch_rope_rows},
    {"layernorm", launch_layernorm},
    {nullptr, nullptr},
};

}  // namespace akunu
