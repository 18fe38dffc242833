#include "core/device_factory.h"

#include "core/error.h"
#include "cpu/cpu_device.h"
#include "metal/emulation/emulated_metal_device.h"
#if defined(AKUNU_HAVE_CUDA)
#include "cuda/cuda_device.h"
#endif
#if defined(AKUNU_HAVE_METAL)
#include "metal/metal_device.h"
#endif

namespace akunu {

std::unique_ptr<Device> create_device(const std::string& name, int n_threads) {
    if (name == "cpu") return std::make_unique<CpuDevice>(n_threads);
    if (name == "auto") {
#if defined(AKUNU_HAVE_METAL)
        if (MetalDevice::available()) return std::make_unique<MetalDevice>();
#endif
#if defined(AKUNU_HAVE_CUDA)
        if (CudaDevice::available()) return std::make_unique<CudaDevice>();
#endif
        return std::make_unique<CpuDevice>(n_threads);
    }
    if (name == "cuda") {
#if defined(AKUNU_HAVE_CUDA)
        return std::make_unique<CudaDevice>();  // a clear error when no GPU is visible
#else
        throw Error("device 'cuda' is not available in this build of akunu (built without the CUDA toolkit)");
#endif
    }
    if (name == "metal-emu") return std::make_unique<EmulatedMetalDevice>();
    if (name == "metal") {
#if defined(AKUNU_HAVE_METAL)
        return std::make_unique<MetalDevice>();  // a clear error when there is no Metal GPU
#else
        throw Error("device 'metal' is not available in this build of akunu (Metal needs macOS on Apple Silicon)");
#endif
    }
    throw Error("unknown device '" + name + "' (expected 'cpu', 'cuda', 'metal' or 'auto')");
}

}  // namespace akunu
