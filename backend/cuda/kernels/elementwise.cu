// Activations (gated: silu_gate, gelu_gate, gpt-oss's swiglu_oai), residual
// adds, row adds, row gathers and im2col with the CPU kernels' meaning
// (backend/cpu/kernels/elementwise.cpp), one thread per element.
#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "device_math.cuh"
#include "moe_glu.h"

namespace akunu {
namespace {

template <bool Gelu>
__global__ void gated_kernel(GatedActParams p, const float* g, const float* u, float* o) {
    pdl_wait();
    pdl_launch_dependents();
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.n * p.n_tokens) return;
    const size_t t = idx / p.n, i = idx % p.n;
    const float gv = g[t * p.gate_stride + i];
    o[t * p.out_stride + i] = (Gelu ? gelu(gv) : silu(gv)) * u[t * p.up_stride + i];
}

template <bool Gelu>
void launch_gated(const CudaArgs& a) {
    if (a.absorbed.set) return launch_moe_glu(a, Gelu ? GluAct::kGelu : GluAct::kSilu);  // with gate and up
    GatedActParams p = a.p<GatedActParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    launch_pdl(gated_kernel<Gelu>, blocks_for(n, 256), 256, 0, a, p, a.b<float>(0), a.b<float>(1), a.b<float>(2));
}

// gpt-oss's gated activation (device_math.cuh: swiglu_oai).
__global__ void swiglu_oai_kernel(GatedActParams p, const float* g, const float* u, float* o) {
    pdl_wait();
    pdl_launch_dependents();
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.n * p.n_tokens) return;
    const size_t t = idx / p.n, i = idx % p.n;
    o[t * p.out_stride + i] = swiglu_oai(g[t * p.gate_stride + i], u[t * p.up_stride + i]);
}

void launch_swiglu_oai(const CudaArgs& a) {
    if (a.absorbed.set) return launch_moe_glu(a, GluAct::kSwigluOai);  // with gate and up
    GatedActParams p = a.p<GatedActParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    if (n == 0) return;
    launch_pdl(swiglu_oai_kernel, blocks_for(n, 256), 256, 0, a, p, a.b<float>(0), a.b<float>(1), a.b<float>(2));
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
    launch_pdl(add_kernel, blocks_for(n, 256), 256, 0, a, n, a.b<float>(0), a.b<float>(1));
}

// dst[r, :] = src[idx[r], :] (the rows of a ragged pass whose logits are wanted).
__global__ void gather_rows_kernel(GatherRowsParams p, const float* src, const int32_t* idx, float* dst) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)p.dim * p.n_rows) return;
    const size_t r = i / p.dim, d = i % p.dim;
    dst[r * p.dst_stride + d] = src[(size_t)idx[r] * p.src_stride + d];
}

void launch_gather_rows(const CudaArgs& a) {
    GatherRowsParams p = a.p<GatherRowsParams>();
    const size_t n = (size_t)p.dim * p.n_rows;
    if (n == 0) return;
    gather_rows_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<int32_t>(1), a.b<float>(2));
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

__global__ void softcap_kernel(size_t n, float cap, float inv, float* x) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cap * tanhf(x[i] * inv);
}

void launch_softcap(const CudaArgs& a) {
    SoftcapParams p = a.p<SoftcapParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    if (n) softcap_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(n, p.cap, 1.0f / p.cap, a.b<float>(0));
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
    // (a decode token's expert gate and up before them join their kernel: moe_glu.h)
    {"silu_gate", launch_gated<false>, false, moe_glu_q8_output, nullptr, moe_glu_absorbs},
    {"gelu_gate", launch_gated<true>, false, moe_glu_q8_output, nullptr, moe_glu_absorbs},
    {"swiglu_oai", launch_swiglu_oai, false, moe_glu_q8_output, nullptr, moe_glu_absorbs},
    {"add_inplace", launch_add},
    {"gather_rows", launch_gather_rows},
    {"gelu_erf", launch_gelu_erf},
    {"softcap", launch_softcap},
    {"add_rows", launch_add_rows},
    {"im2col_1d", launch_im2col_1d},
    {nullptr, nullptr},
};

}  // namespace akunu
