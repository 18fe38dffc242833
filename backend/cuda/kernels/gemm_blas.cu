// Prefill GEMM through cuBLAS: y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]).
//
// The same arithmetic as gemm_tc.cuh (both operands F16, sums in F32: the
// precision stated by tests/test_device_kernels.py), with cuBLAS's Hopper
// kernels doing the products: activations are rounded to F16 (saturated)
// once per pass into scratch; F16 weights are read in place, other formats
// are decoded to F16 (tc_formats.cuh, the decoders gemm_tc uses) a chunk of
// rows at a time into a scratch of about kChunkBytes, small enough to be
// read back from L2 by the GEMM that follows. llama.cpp takes cuBLAS for F16
// weights too; quantized formats pay a decode pass (2 bytes written and read
// per weight) that the GEMM's speed outweighs at prefill sizes.
//
// Which passes: all formats tc_formats decodes, 16 tokens or more for F16
// (nothing to decode), kMinQuantTokens or more for the rest (fewer tokens
// re-read the weights less than a decode pass costs). CudaTuning::prefill_gemm
// = tc turns this path off, = blas makes it take every pass it can.
#include "gemm_blas.h"

#include <algorithm>
#include <string>

#include "../cublas_library.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "tc_formats.cuh"

namespace akunu {
namespace {

using namespace tc_formats;

constexpr size_t kChunkBytes = 16u << 20;  // F16 weight rows decoded per GEMM call
constexpr uint32_t kMinQuantTokens = 128;

// x (F32, rows x_stride apart) -> F16 [M][K], saturated at +-65504 as gemm_tc rounds.
__global__ void activations_to_f16(const float* __restrict__ x, uint32_t x_stride, uint32_t M, uint32_t K,
                                   __half* __restrict__ out) {
    const size_t quads = (size_t)M * (K / 4);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < quads; i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / (K / 4), q = i % (K / 4);
        const float4 v = *reinterpret_cast<const float4*>(x + t * x_stride + 4 * q);
        const auto sat = [](float f) { return fminf(fmaxf(f, -65504.0f), 65504.0f); };
        *reinterpret_cast<uint2*>(out + t * K + 4 * q) =
            make_uint2(pack_half2(sat(v.x), sat(v.y)), pack_half2(sat(v.z), sat(v.w)));
    }
}

// Rows [r0, r0 + rows) of W decoded to F16 [rows][K]: a thread per 16-element unit.
template <class F>
__global__ void decode_rows_f16(const uint8_t* __restrict__ W, uint32_t K, uint32_t r0, uint32_t rows,
                                __half* __restrict__ out) {
    const size_t units_per_row = K / 16, units = (size_t)rows * units_per_row;
    const size_t row_bytes = (size_t)(K / F::kElems) * F::kBytes;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < units; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / units_per_row;
        const int c = (int)(i % units_per_row), k0 = 32 * (c / 2), u = c % 2;
        F::store(F::load(W + (r0 + r) * row_bytes, k0, u), out + r * K + k0, k0, u);
    }
}

__global__ void add_bias(float* __restrict__ y, uint32_t y_stride, uint32_t M, uint32_t N,
                         const float* __restrict__ bias) {
    const size_t total = (size_t)M * N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        y[(i / N) * y_stride + i % N] += bias[i % N];
}

unsigned grid_for(size_t items) {
    const size_t blocks = (items + 255) / 256;
    return (unsigned)(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

using Decoder = void (*)(const uint8_t*, uint32_t, uint32_t, uint32_t, __half*);

// The decoder of a format cuBLAS can take through F16 (nullptr for F16 itself,
// read in place), and whether it is known at all.
bool decoder_for(const MatmulParams& p, uintptr_t w, Decoder* dec) {
    *dec = nullptr;
    switch (p.dtype) {
        case GGML_F16: return w % 16 == 0;
        case GGML_BF16: *dec = decode_rows_f16<TcBF16>; return w % 16 == 0;
        case GGML_F32: *dec = decode_rows_f16<TcF32>; return w % 16 == 0;
        case GGML_Q8_0: *dec = decode_rows_f16<TcQ8_0>; return w % 2 == 0;
        case GGML_Q4_0: *dec = decode_rows_f16<TcQ4_0>; return w % 2 == 0;
        case GGML_Q4_1: *dec = decode_rows_f16<TcQ4_1>; return w % 2 == 0;
        case GGML_Q5_0: *dec = decode_rows_f16<TcQ5_0>; return w % 2 == 0;
        case GGML_Q5_1: *dec = decode_rows_f16<TcQ5_1>; return w % 2 == 0;
        case GGML_MXFP4: *dec = decode_rows_f16<TcMXFP4>; return true;
        case AKUNU_Q8_0_X8: *dec = decode_rows_f16<TcQ8_0X8>; return p.K % 256 == 0 && w % 16 == 0;
        case AKUNU_Q4_0_X8: *dec = decode_rows_f16<TcQ4_0X8>; return p.K % 256 == 0 && w % 16 == 0;
        case AKUNU_Q6_K_X8: *dec = decode_rows_f16<TcQ6_KX8>; return p.K % 2048 == 0 && w % 16 == 0;
        case GGML_Q4_K: *dec = decode_rows_f16<TcQ4_K>; return p.K % 256 == 0 && w % 16 == 0;
        case GGML_Q6_K: *dec = decode_rows_f16<TcQ6_K>; return p.K % 256 == 0 && w % 2 == 0;
        default: return false;
    }
}

void check_blas(int status, const char* what) {
    if (status != CublasLibrary::kSuccess)
        throw Error(std::string("cuBLAS ") + what + " failed with status " + std::to_string(status));
}

}  // namespace

std::unique_ptr<BlasGemm> make_blas_gemm(PrefillGemm mode) {
    if (mode == PrefillGemm::kTc) return nullptr;
    std::string why;
    const CublasLibrary* lib = CublasLibrary::get(&why);
    if (!lib) {
        if (mode == PrefillGemm::kBlas) throw Error("AKUNU_CUDA_TUNING asks for prefill_gemm=blas, but " + why);
        return nullptr;
    }
    return std::unique_ptr<BlasGemm>(new BlasGemm(lib, mode == PrefillGemm::kBlas));
}

BlasGemm::~BlasGemm() {
    if (handle_) lib_->destroy(handle_);
    for (__half* b : buf_) cudaFree(b);
}

__half* BlasGemm::scratch(int which, size_t elems) {
    if (elems_[which] >= elems) return buf_[which];
    cudaFree(buf_[which]);  // waits for the kernels that read it
    buf_[which] = nullptr;
    elems_[which] = 0;
    if (cudaMalloc(&buf_[which], elems * sizeof(__half)) != cudaSuccess) {
        cudaGetLastError();
        buf_[which] = nullptr;
        return nullptr;
    }
    elems_[which] = elems;
    return buf_[which];
}

bool BlasGemm::run(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    const uint32_t M = p.n_tokens, N = p.N, K = p.K;
    if (M < 16 || N == 0 || K == 0 || K % 32 != 0) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;  // float4 reads
    Decoder dec;
    if (!decoder_for(p, reinterpret_cast<uintptr_t>(a.buf[0]), &dec)) return false;
    if (dec && M < kMinQuantTokens && !every_pass_) return false;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(a.stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone)
        return false;  // no allocation or handle creation inside a graph
    if (!handle_) check_blas(lib_->create(&handle_), "handle creation");
    // Rows per GEMM call: the whole matrix for F16, else chunks of ~kChunkBytes (multiples of 128 rows).
    uint32_t chunk = N;
    if (dec) {
        const size_t fit = kChunkBytes / ((size_t)K * sizeof(__half));
        chunk = (uint32_t)std::min<size_t>(N, std::max<size_t>(128, fit / 128 * 128));
    }
    __half* xh = scratch(0, (size_t)M * K);
    __half* wh = dec ? scratch(1, (size_t)chunk * K) : nullptr;
    if (!xh || (dec && !wh)) return false;  // out of memory: the other kernels need no scratch

    check_blas(lib_->set_stream(handle_, a.stream), "set stream");
    activations_to_f16<<<grid_for((size_t)M * K / 4), 256, 0, a.stream>>>(x, p.x_stride, M, K, xh);
    const float one = 1.0f, zero = 0.0f;
    const uint8_t* W = a.b<uint8_t>(0);
    for (uint32_t r0 = 0; r0 < N; r0 += chunk) {
        const uint32_t rows = std::min(chunk, N - r0);
        const __half* w = reinterpret_cast<const __half*>(W) + (size_t)r0 * K;  // F16: in place
        if (dec) {
            dec<<<grid_for((size_t)rows * K / 16), 256, 0, a.stream>>>(W, K, r0, rows, wh);
            w = wh;
        }
        // Column-major view: y^T (rows x M, ldc = y_stride) = W^T^T (K x rows, transposed) * x^T (K x M).
        check_blas(lib_->gemm_ex(handle_, CublasLibrary::kOpT, CublasLibrary::kOpN, (int)rows, (int)M, (int)K, &one,
                                 w, CUDA_R_16F, (int)K, xh, CUDA_R_16F, (int)K, &zero, y + r0, CUDA_R_32F,
                                 (int)p.y_stride, CublasLibrary::kCompute32F, CublasLibrary::kGemmDefault),
                   "GEMM");
    }
    if (p.has_bias) add_bias<<<grid_for((size_t)M * N), 256, 0, a.stream>>>(y, p.y_stride, M, N, a.b<float>(3));
    return true;
}

}  // namespace akunu
