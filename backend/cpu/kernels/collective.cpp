// The collectives of a tensor-parallel model as commands (core/collective.h):
// their meaning, which the GPU launchers (NCCL) reproduce.
#include <algorithm>
#include <cstring>

#include "core/collective.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

Collective& require(const CpuArgs& a, const char* what) {
    if (!a.collective) throw Error(std::string(what) + " needs a tensor-parallel device (Device::set_collective)");
    return *a.collective;
}

// x[t, 0..n) summed over the ranks, in place (rows contiguous); with
// accumulate, the sum then added to buffer 1 (the residual stream).
void all_reduce_sum(const CpuArgs& a) {
    AllReduceParams p = a.p<AllReduceParams>();
    const size_t n = (size_t)p.n * p.n_tokens;
    float* x = a.b<float>(0);
    require(a, "all_reduce_sum").all_reduce_sum(x, n, nullptr);
    if (p.accumulate) {
        float* acc = a.b<float>(1);
        for (size_t i = 0; i < n; i++) acc[i] += x[i];
    }
}

// Gathers every rank's column block into staging (rank-major), then
// interleaves the blocks into whole rows, keeping columns [0, out_cols).
void all_gather_cols(const CpuArgs& a) {
    AllGatherColsParams p = a.p<AllGatherColsParams>();
    Collective& c = require(a, "all_gather_cols");
    const size_t block = (size_t)p.n_rows * p.cols;
    float* stage = a.b<float>(2);
    c.all_gather(a.b<float>(0), stage, block, nullptr);
    float* out = a.b<float>(1);
    for (uint32_t t = 0; t < p.n_rows; t++)
        for (int r = 0; r < c.size(); r++) {
            const size_t c0 = (size_t)r * p.cols;
            if (c0 >= p.out_cols) break;
            const size_t n = std::min<size_t>(p.cols, p.out_cols - c0);
            std::memcpy(out + (size_t)t * p.out_stride + c0, stage + (size_t)r * block + (size_t)t * p.cols,
                        n * sizeof(float));
        }
}

}  // namespace

extern const CpuKernelEntry kCollectiveKernels[] = {
    {"all_reduce_sum", all_reduce_sum},
    {"all_gather_cols", all_gather_cols},
    {nullptr, nullptr},
};

}  // namespace akunu
