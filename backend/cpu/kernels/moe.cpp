// Mixture-of-experts kernels: router gating with top-k selection and the
// expert matmuls over the selected experts.
#include "cpu_kernel.h"

namespace akunu {

extern const CpuKernelEntry kMoeKernels[] = {
    {nullptr, nullptr},
};

}  // namespace akunu
