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
    // Set only while a decode step is captured into a CUDA graph (one graph
    // serves every position): the replay state lives in device memory and a
    // kernel reads its position from *replay_pos instead of the patched
    // parameter, and its token slot (an int32 index into buffer 1) from
    // *replay_token. Only launchers whose entry says `reads_replay` see them.
    const uint32_t* replay_pos = nullptr;
    const uint32_t* replay_token = nullptr;
    // Device scratch owned by the CudaDevice (split-attention partials), zeroed
    // at creation; kernels that count in it leave their counters at zero.
    uint8_t* workspace = nullptr;
    size_t workspace_bytes = 0;
    // Device scratch for a decode GEMV's 8-bit activations (act_q8.h): written
    // and read by the kernels of one command, so every command may reuse it.
    uint8_t* act_scratch = nullptr;
    size_t act_scratch_bytes = 0;

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
    // The launcher honours CudaArgs::replay_pos / replay_token and its launch
    // shape does not depend on the position: a command that patches the
    // position or token slot can be captured in a decode graph only then.
    bool reads_replay = false;
};

#ifdef __CUDACC__
// The position a kernel runs at: the replay state's inside a captured decode
// graph, else the parameter patched on the host.
__device__ inline uint32_t replay_position(const uint32_t* replay_pos, uint32_t patched) {
    return replay_pos ? *replay_pos : patched;
}
// The token slot's element of a chain-id buffer (see replay_position).
template <typename T>
__device__ inline T* replay_slot(T* base, const uint32_t* replay_token) {
    return replay_token ? base + *replay_token : base;
}
#endif

inline unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

}  // namespace akunu
