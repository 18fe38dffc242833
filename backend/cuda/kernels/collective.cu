// The collectives of a tensor-parallel model as commands (core/collective.h;
// their meaning: backend/cpu/kernels/collective.cpp). The launchers enqueue
// NCCL operations through the device's collective (CudaArgs::collective,
// nccl_collective.h) on the rank's stream, from the rank's own thread with its
// GPU current; NCCL operations can be captured in the device's CUDA graphs
// (cudaStreamCaptureModeThreadLocal), so a decode step with its collectives
// is one graph. Neither reads the position: no reads_replay.
#include <algorithm>
#include <string>

#include "core/collective.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {
namespace {

Collective& require(const CudaArgs& a, const char* what) {
    if (!a.collective)
        throw Error(std::string(what) + " needs a tensor-parallel device (Device::set_collective)");
    return *a.collective;
}

__global__ void add_f32_kernel(float* __restrict__ acc, const float* __restrict__ x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] += x[i];
}

// x[t, 0..n) summed over the ranks, in place (rows contiguous: one
// reduction); with accumulate, the sum added to buffer 1 instead: in the
// collective's one operation where it has one (the peer-to-peer kernel),
// else the reduction, then an add.
void launch_all_reduce_sum(const CudaArgs& a) {
    const AllReduceParams p = a.p<AllReduceParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    Collective& c = require(a, "all_reduce_sum");
    if (!p.accumulate) return c.all_reduce_sum(a.b<float>(0), n, a.stream);
    if (!a.buf[1]) throw Error("all_reduce_sum with accumulate needs its residual buffer (buffer 1)");
    if (c.all_reduce_add(a.b<float>(0), a.b<float>(1), n, a.stream)) return;
    c.all_reduce_sum(a.b<float>(0), n, a.stream);
    if (n == 0) return;
    add_f32_kernel<<<std::min(blocks_for(n, 256), 1024u), 256, 0, a.stream>>>(a.b<float>(1), a.b<const float>(0), n);
}

// out[t * out_stride + c] = rank (c / cols)'s column c % cols of row t, for
// c < out_cols: stage holds the ranks' blocks one after another (rank-major),
// each n_rows rows of cols floats. Rows along y, columns along x.
__global__ void interleave_cols_kernel(const float* __restrict__ stage, float* __restrict__ out, uint32_t cols,
                                       uint32_t n_rows, uint32_t out_stride, uint32_t out_cols) {
    const size_t block = (size_t)n_rows * cols;
    for (uint32_t t = blockIdx.y; t < n_rows; t += gridDim.y)
        for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < out_cols; c += gridDim.x * blockDim.x) {
            const uint32_t r = c / cols;
            out[(size_t)t * out_stride + c] = stage[r * block + (size_t)t * cols + (c - r * cols)];
        }
}

// Every rank's column block of an n_rows-row matrix gathered into whole rows
// (columns [0, out_cols) of them), the same on every rank: ncclAllGather into
// the staging buffer, then the interleave. One row whose blocks fill it
// exactly (a decode step's logits over a vocabulary the ranks split evenly)
// is gathered straight into out.
void launch_all_gather_cols(const CudaArgs& a) {
    const AllGatherColsParams p = a.p<AllGatherColsParams>();
    Collective& c = require(a, "all_gather_cols");
    const size_t whole = (size_t)c.size() * p.cols;
    if (p.out_cols > whole)
        throw Error("all_gather_cols: out_cols " + std::to_string(p.out_cols) + " exceeds the ranks' " +
                    std::to_string(whole) + " columns");
    if (p.n_rows > 1 && p.out_stride < p.out_cols)
        throw Error("all_gather_cols: out_stride " + std::to_string(p.out_stride) + " is less than out_cols " +
                    std::to_string(p.out_cols));
    const size_t block = (size_t)p.n_rows * p.cols;
    if (block == 0 || p.out_cols == 0) return;  // (the same on every rank: the parameters are)
    if (p.n_rows == 1 && whole == p.out_cols) {
        c.all_gather(a.b<float>(0), a.b<float>(1), block, a.stream);
        return;
    }
    if (!a.buf[2]) throw Error("all_gather_cols needs its staging buffer (buffer 2)");
    c.all_gather(a.b<float>(0), a.b<float>(2), block, a.stream);
    const unsigned threads = 256;
    const dim3 grid(std::min(blocks_for(p.out_cols, threads), 1024u), std::min(p.n_rows, 65535u));
    // a plain launch (not launch_pdl): it waits for the gather on the stream;
    // the programmatic kernels after it wait for it in pdl_wait()
    interleave_cols_kernel<<<grid, threads, 0, a.stream>>>(a.b<const float>(2), a.b<float>(1), p.cols, p.n_rows,
                                                             p.out_stride, p.out_cols);
}

}  // namespace

extern const CudaKernelEntry kCudaCollectiveKernels[] = {
    {"all_reduce_sum", launch_all_reduce_sum},
    {"all_gather_cols", launch_all_gather_cols},
    {nullptr, nullptr},
};

}  // namespace akunu
