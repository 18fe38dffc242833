// cuBLAS, loaded at run time (dlopen) rather than linked: the CUDA backend
// builds wherever nvcc is (a CI runner may have no cuBLAS), and where the
// toolkit's or the pip package's libcublas is found it serves
// prefill GEMMs (kernels/gemm_blas.cu). Only the few entry points that path
// needs, declared with the C ABI of cublas_api.h (enums passed as int).
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>

#include <string>

namespace akunu {

struct CublasLibrary {
    using Handle = void*;
    enum : int { kOpN = 0, kOpT = 1, kCompute32F = 68, kGemmDefault = -1, kSuccess = 0 };
    int (*create)(Handle*) = nullptr;
    int (*destroy)(Handle) = nullptr;
    int (*set_stream)(Handle, cudaStream_t) = nullptr;
    int (*gemm_ex)(Handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A,
                   cudaDataType a_type, int lda, const void* B, cudaDataType b_type, int ldb, const void* beta,
                   void* C, cudaDataType c_type, int ldc, int compute_type, int algo) = nullptr;
    std::string path;  // the file that was loaded

    // The library, loaded once per process: AKUNU_CUBLAS_LIBRARY if set, else
    // libcublas.so.<CUDA major> from the loader's search path, $CUDA_HOME /
    // $CUDA_PATH, /usr/local/cuda and the folders in AKUNU_CUBLAS_DIRS
    // (colon-separated; the Python package fills it with NVIDIA's pip
    // packages' lib folders). nullptr (and *why) when none loads.
    static const CublasLibrary* get(std::string* why = nullptr);
};

}  // namespace akunu
