#include "core/device_factory.h"

#include <algorithm>

#include "core/error.h"
#include "cpu/cpu_device.h"
#include "cpu/cpu_topology.h"
#include "metal/emulation/emulated_metal_device.h"
#include "parallel/host_collective.h"
#include "parallel/tensor_parallel_device.h"
#if defined(AKUNU_HAVE_CUDA)
#include "cuda/cuda_device.h"
#include "cuda/nccl_collective.h"
#endif
#if defined(AKUNU_HAVE_METAL)
#include "metal/metal_device.h"
#endif

namespace akunu {

std::vector<std::string> device_names() {
    std::vector<std::string> names = {"auto", "cpu"};
#if defined(AKUNU_HAVE_CUDA)
    names.push_back("cuda");
#endif
#if defined(AKUNU_HAVE_METAL)
    names.push_back("metal");
#endif
    if (EmulatedMetalDevice::library_available()) names.push_back("metal-emu");
    return names;
}

static std::string quoted_device_names() {
    std::string s;
    for (const std::string& n : device_names()) s += (s.empty() ? "'" : ", '") + n + "'";
    return s;
}

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
        throw Error("device 'cuda' is not available in this build of akunu (built without the CUDA toolkit; "
                    "devices: " + quoted_device_names() + ")");
#endif
    }
    if (name == "metal") {
#if defined(AKUNU_HAVE_METAL)
        return std::make_unique<MetalDevice>();  // a clear error when there is no Metal GPU
#else
        throw Error("device 'metal' is not available in this build of akunu (Metal needs macOS on Apple Silicon; "
                    "devices: " + quoted_device_names() + ")");
#endif
    }
    // The test device exists only while its kernel library loads.
    if (name == "metal-emu" && EmulatedMetalDevice::library_available()) return std::make_unique<EmulatedMetalDevice>();
    std::string msg = "unknown device '" + name + "' (devices: " + quoted_device_names() + ")";
    if (name == "metal-emu") msg += ": " + EmulatedMetalDevice::library_error();
    throw Error(msg);
}

std::unique_ptr<Device> create_host_device() { return std::make_unique<CpuDevice>(1); }

std::unique_ptr<TensorParallelDevice> create_tensor_parallel_device(const std::string& name, int n, int n_threads) {
    if (n < 2 || n > 64) throw Error("tensor_parallel must be between 2 and 64 ranks, got " + std::to_string(n));
    std::string backend = name;
#if defined(AKUNU_HAVE_CUDA)
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) {
        cudaGetLastError();
        gpus = 0;
    }
    if (backend == "auto") backend = gpus > 0 ? "cuda" : "cpu";  // (too few GPUs: a clear error, not the CPU)
    if (backend == "cuda") {
        if (gpus < n)
            throw Error("tensor_parallel=" + std::to_string(n) + " on 'cuda' needs " + std::to_string(n) +
                        " GPUs, but " + std::to_string(gpus) + " are visible");
        std::vector<int> ordinals;
        for (int r = 0; r < n; r++) ordinals.push_back(r);
        return std::make_unique<TensorParallelDevice>(make_nccl_collectives(ordinals),
                                                      [](int r) { return std::make_unique<CudaDevice>(r); });
    }
#endif
    if (backend == "auto") backend = "cpu";
    if (backend != "cpu")
        throw Error("tensor parallelism runs on 'cuda' (one GPU a rank) or 'cpu', not on device '" + name + "'" +
                    (name == "cuda" ? std::string(": this build of akunu has no CUDA backend") : std::string()));
    const int threads = n_threads > 0 ? n_threads : default_cpu_threads();
    const int per_rank = std::max(1, threads / n);
    return std::make_unique<TensorParallelDevice>(make_host_collectives(n),
                                                  [per_rank](int) { return std::make_unique<CpuDevice>(per_rank); });
}

}  // namespace akunu
