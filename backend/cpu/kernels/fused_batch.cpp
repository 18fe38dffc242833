// The fused kernels of batch passes (continuous batching), defined as the
// unfused sequences they replace.
#include "cpu_kernel.h"

namespace akunu {

extern const CpuKernelEntry kFusedBatchKernels[] = {
    {nullptr, nullptr},
};

}  // namespace akunu
