// NCCL, loaded at run time (dlopen) rather than linked: the CUDA backend
// builds wherever nvcc is (a CI runner may have no NCCL), and only a
// tensor-parallel model needs it (nccl_collective.h). Only the few entry
// points that path uses, declared with the C ABI of nccl.h (enums passed as
// int, a communicator as an opaque pointer).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace akunu {

struct NcclLibrary {
    using Comm = void*;  // ncclComm_t
    // ncclUniqueId (ncclCommInitAll makes its own; declared for the ABI's sake)
    struct UniqueId {
        char internal[128];
    };
    // ncclResult_t ncclSuccess, ncclDataType_t ncclFloat32, ncclRedOp_t ncclSum
    enum : int { kSuccess = 0, kFloat32 = 7, kSum = 0 };
    // The oldest release taken (ncclGetVersion's code): CUDA graph capture
    // arrived in 2.9 and mixing captured with eager operations on one
    // communicator later; 2.18 is older than any release built for CUDA 12.2+.
    enum : int { kMinVersion = 21800 };

    int (*comm_init_all)(Comm* comms, int ndev, const int* devlist) = nullptr;
    int (*comm_destroy)(Comm) = nullptr;
    int (*comm_abort)(Comm) = nullptr;
    int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, Comm, cudaStream_t) = nullptr;
    int (*all_gather)(const void* send, void* recv, size_t send_count, int dtype, Comm, cudaStream_t) = nullptr;
    const char* (*get_error_string)(int result) = nullptr;
    int (*get_version)(int* version) = nullptr;
    const char* (*get_last_error)(Comm) = nullptr;  // optional (NCCL 2.13+): the last error's detail
    int version = 0;   // ncclGetVersion's code
    std::string path;  // the file that was loaded

    // The library, loaded once per process: AKUNU_NCCL_LIBRARY if set (only
    // that file), else libnccl.so.2 from the loader's search path, $CUDA_HOME /
    // $CUDA_PATH, /usr/local/cuda and the folders in AKUNU_CUBLAS_DIRS
    // (colon-separated; the Python package fills it with NVIDIA's pip
    // packages' lib folders, nvidia/nccl/lib among them). nullptr (and *why:
    // the files tried, or the symbol or version that was wrong) when none loads.
    static const NcclLibrary* get(std::string* why = nullptr);

    // "2.21.5" from ncclGetVersion's code.
    static std::string version_string(int code);
};

}  // namespace akunu
