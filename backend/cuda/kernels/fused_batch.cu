// The fused kernels of batch passes (continuous batching) on CUDA.
#include "cuda_kernel.h"

namespace akunu {

extern const CudaKernelEntry kCudaFusedBatchKernels[] = {
    {nullptr, nullptr},
};

}  // namespace akunu
