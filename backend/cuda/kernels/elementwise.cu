// RMSNorm, LayerNorm, RoPE, activations, residual adds and the KV-cache write:
// the CPU kernels' meaning (backend/cpu/kernels), one thread per element or
// one block per row.
#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "device_math.cuh"

namespace akunu {
namespace {

// One block per row; the sum of squares in double, as the CPU twin.
__global__ void rmsnorm_kernel(NormParams p, const float* x, const float* w, float* y) {
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t row = blockIdx.x;
    const uint32_t t = row / p.rows_per_token, r = row % p.rows_per_token;
    const float* xr = x + (size_t)t * p.x_stride + (size_t)r * p.dim;
    float* yr = y + (size_t)t * p.y_stride + (size_t)r * p.dim;
    __shared__ double partial[32];
    double ss = 0;
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) ss += (double)xr[i] * xr[i];
    ss = block_sum(ss, partial);
    const float scale = 1.0f / sqrtf((float)(ss / p.dim) + p.eps);
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) yr[i] = xr[i] * scale * (w[i] + p.weight_offset);
}

void launch_rmsnorm(const CudaArgs& a) {
    NormParams p = a.p<NormParams>();
    const float* x = a.b<float>(0) + (size_t)p.row0 * p.x_stride;
    launch_pdl(rmsnorm_kernel, p.n_tokens * p.rows_per_token, 256, 0, a.stream, p, x, a.b<float>(1), a.b<float>(2));
}

// Gemma 3's post-norms fused with the residual add (the CPU twin: fused.cpp):
// h += rmsnorm(y) * (w + offset), one block per token; one launch and one
// dependent step fewer than rmsnorm then add_inplace.
__global__ void rmsnorm_residual_kernel(NormParams p, const float* y, const float* w, float* h) {
    pdl_wait();
    pdl_launch_dependents();
    const float* yr = y + (size_t)blockIdx.x * p.x_stride;
    float* hr = h + (size_t)blockIdx.x * p.y_stride;
    const float scale = rms_scale(yr, p.dim, p.eps);
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) hr[i] += yr[i] * scale * (w[i] + p.weight_offset);
}

void launch_rmsnorm_residual(const CudaArgs& a) {
    NormParams p = a.p<NormParams>();
    if (p.rows_per_token != 1 || p.row0 != 0) throw Error("rmsnorm_residual: one row a token, from row 0");
    launch_pdl(rmsnorm_residual_kernel, p.n_tokens, 256, 0, a.stream, p, a.b<float>(0), a.b<float>(1), a.b<float>(2));
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

__global__ void rope_kernel(RopeParams p, float* x, const float* factors, const uint32_t* replay_pos) {
    const uint32_t half = p.head_dim / 2;
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t total = (size_t)p.n_tokens * p.n_heads * half;
    if (idx >= total) return;
    const uint32_t i = (uint32_t)(idx % half);
    const uint32_t h = (uint32_t)((idx / half) % p.n_heads);
    const uint32_t t = (uint32_t)(idx / ((size_t)half * p.n_heads));
    const float pos = (float)(replay_position(replay_pos, p.pos0) + t);
    float* v = x + (size_t)t * p.row_stride + (size_t)h * p.head_dim;
    uint32_t i0, i1;
    float o0, o1;
    rope_pair(i, p.head_dim, p.neox != 0, pos, p.freq_scale, p.freq_base, factors, v, v, i0, i1, o0, o1);
}

void launch_rope(const CudaArgs& a) {
    RopeParams p = a.p<RopeParams>();
    const size_t n = (size_t)p.n_tokens * p.n_heads * (p.head_dim / 2);
    rope_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0),
                                                          p.has_freq_factors ? a.b<float>(1) : nullptr, a.replay_pos);
}

template <bool Gelu>
__global__ void gated_kernel(GatedActParams p, const float* g, const float* u, float* o) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.n * p.n_tokens) return;
    const size_t t = idx / p.n, i = idx % p.n;
    const float gv = g[t * p.gate_stride + i];
    o[t * p.out_stride + i] = (Gelu ? gelu(gv) : silu(gv)) * u[t * p.up_stride + i];
}

template <bool Gelu>
void launch_gated(const CudaArgs& a) {
    GatedActParams p = a.p<GatedActParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    gated_kernel<Gelu><<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1), a.b<float>(2));
}

__global__ void add_kernel(size_t n, float* x, const float* y) {
    pdl_wait();
    pdl_launch_dependents();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

void launch_add(const CudaArgs& a) {
    AddParams p = a.p<AddParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    launch_pdl(add_kernel, blocks_for(n, 256), 256, 0, a.stream, n, a.b<float>(0), a.b<float>(1));
}

__global__ void gelu_erf_kernel(size_t n, float* x) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void launch_gelu_erf(const CudaArgs& a) {
    AddParams p = a.p<AddParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    gelu_erf_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(n, a.b<float>(0));
}

__global__ void add_rows_kernel(AddRowsParams p, float* x, const float* table, const int32_t* seg) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)p.dim * p.n_tokens) return;
    const uint32_t t = (uint32_t)(i / p.dim), d = (uint32_t)(i % p.dim);
    const size_t row = seg ? (size_t)(p.pos0 + t - (uint32_t)seg[2 * t]) : (size_t)(p.pos0 + t);
    x[i] += table[row * p.dim + d];
}

void launch_add_rows(const CudaArgs& a) {
    AddRowsParams p = a.p<AddRowsParams>();
    const size_t n = (size_t)p.dim * p.n_tokens;
    add_rows_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1),
                                                              p.segmented ? a.b<int32_t>(2) : nullptr);
}

// K/V rounded to the F16 cache with the CPU's rounding (round to nearest even).
__global__ void kv_write_kernel(KVWriteParams p, const float* k, const float* v, uint16_t* kc, uint16_t* vc,
                                const uint32_t* replay_pos) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.kv_dim * p.n_tokens) return;
    const size_t t = idx / p.kv_dim, i = idx % p.kv_dim;
    const size_t dst = (size_t)(replay_position(replay_pos, p.pos0) + t) * p.kv_dim + i;
    kc[dst] = f32_to_f16(k[t * p.k_stride + i]);
    vc[dst] = f32_to_f16(v[t * p.v_stride + i]);
}

void launch_kv_write(const CudaArgs& a) {
    KVWriteParams p = a.p<KVWriteParams>();
    const size_t n = (size_t)p.kv_dim * p.n_tokens;
    kv_write_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1), a.b<uint16_t>(2),
                                                              a.b<uint16_t>(3), a.replay_pos);
}

// One thread per column element (the CPU twin's im2col_1d).
__global__ void im2col_1d_kernel(Im2ColParams p, const float* x, float* col) {
    const size_t width = (size_t)p.channels * p.kernel_size;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= width * p.n_out) return;
    const size_t t = i / width, r = i % width;
    const uint32_t c = (uint32_t)(r / p.kernel_size), j = (uint32_t)(r % p.kernel_size);
    const int64_t src = (int64_t)t * p.stride + j - p.pad;
    col[i] = (src >= 0 && src < (int64_t)p.in_len) ? x[(size_t)src * p.channels + c] : 0.0f;
}

void launch_im2col_1d(const CudaArgs& a) {
    Im2ColParams p = a.p<Im2ColParams>();
    const size_t n = (size_t)p.channels * p.kernel_size * p.n_out;
    im2col_1d_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1));
}

}  // namespace

extern const CudaKernelEntry kCudaElementwiseKernels[] = {
    {"rmsnorm", launch_rmsnorm},
    {"rmsnorm_residual", launch_rmsnorm_residual},
    {"rope", launch_rope, true},
    {"silu_gate", launch_gated<false>},
    {"gelu_gate", launch_gated<true>},
    {"add_inplace", launch_add},
    {"layernorm", launch_layernorm},
    {"gelu_erf", launch_gelu_erf},
    {"add_rows", launch_add_rows},
    {"im2col_1d", launch_im2col_1d},
    {"kv_write", launch_kv_write, true},
    {nullptr, nullptr},
};

}  // namespace akunu
