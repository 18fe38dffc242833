// The CUDA backend's kernel ABI: a pipeline is a host launcher; the device
// hands it the bound device pointers (already offset), the patched parameter
// bytes and its stream, and the launcher enqueues the kernel asynchronously.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace akunu {

struct CudaArgs {
    uint8_t* buf[8];
    uint8_t params[64];
    cudaStream_t stream;

    template <typename T>
    T p() const {
        T v;
        std::memcpy(&v, params, sizeof(T));
        return v;
    }
    template <typename T>
    T* b(int i) const { return reinterpret_cast<T*>(buf[i]); }
};

using CudaLauncher = void (*)(const CudaArgs&);

struct CudaKernelEntry {
    const char* name;
    CudaLauncher launch;
};

inline unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

}  // namespace akunu
