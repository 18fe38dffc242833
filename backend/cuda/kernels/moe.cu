// Mixture-of-experts kernels on CUDA: router gating with top-k selection
// and the expert matmuls over the selected experts (device-side ids).
#include "cuda_kernel.h"

namespace akunu {

extern const CudaKernelEntry kCudaMoeKernels[] = {
    {nullptr, nullptr},
};

}  // namespace akunu
