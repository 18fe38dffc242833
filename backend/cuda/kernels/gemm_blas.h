// Prefill GEMM through cuBLAS (F16 tensor cores); see gemm_blas.cu.
#pragma once
#include <cuda_fp16.h>

#include <memory>

#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {

struct CublasLibrary;

// One per CudaDevice: the cuBLAS handle and the F16 scratch the GEMMs read
// (activations, dequantized weight rows), made on first use and grown to the
// largest pass; never touched while a stream is captured into a graph.
class BlasGemm {
public:
    // every_pass: take every pass it can (CudaTuning::prefill_gemm = blas)
    BlasGemm(const CublasLibrary* lib, bool every_pass) : lib_(lib), every_pass_(every_pass) {}
    ~BlasGemm();
    BlasGemm(const BlasGemm&) = delete;
    BlasGemm& operator=(const BlasGemm&) = delete;

    // Enqueues y = W x (+ bias) and returns true when this path takes the pass
    // (see gemm_blas.cu for which); false leaves it to gemm_tc / the float kernels.
    bool run(const CudaArgs& a, const MatmulParams& p, const float* x, float* y);

    // The prompt rows of a batch pass (MatmulParams::invariant), any count:
    // every cuBLAS call of a matrix has the same shape (fixed_rows(N) rows,
    // the last slice zero-padded) and the same scratch operands, so cuBLAS
    // picks one algorithm for the matrix whatever the pass holds and a row's
    // sums never depend on its company. Whether it takes a matrix depends on
    // its format, K and addresses, never on the row count. False: not taken.
    // Throws Error when its scratch cannot be allocated.
    bool run_fixed_shape(const CudaArgs& a, const MatmulParams& p, const float* x, float* y);

private:
    void* scratch(int which, size_t bytes);  // 0: activations, 1: weight rows, 2: fixed-shape output
    bool usable(const CudaArgs& a, const MatmulParams& p, const float* x);
    void gemm(uint32_t rows, uint32_t M, uint32_t K, const __half* w, const __half* x, float* y, uint32_t ldc);
    const CublasLibrary* lib_;
    bool every_pass_;
    void* handle_ = nullptr;
    void* buf_[3] = {};
    size_t bytes_[3] = {};
};

// The device's BlasGemm, or nullptr when cuBLAS is not loadable or `mode`
// is kTc; kBlas makes a missing cuBLAS an error.
std::unique_ptr<BlasGemm> make_blas_gemm(PrefillGemm mode);

}  // namespace akunu
