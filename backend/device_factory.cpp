#include "core/device_factory.h"

#include "core/error.h"
#include "cpu/cpu_device.h"

namespace akunu {

std::unique_ptr<Device> create_device(const std::string& name, int n_threads) {
    // "auto" picks the CPU until a GPU backend is built (issues for CUDA / Metal).
    if (name == "cpu" || name == "auto") return std::make_unique<CpuDevice>(n_threads);
    if (name == "cuda" || name == "metal")
        throw Error("device '" + name + "' is not available in this build of akunu");
    throw Error("unknown device '" + name + "' (expected 'cpu', 'cuda', 'metal' or 'auto')");
}

}  // namespace akunu
