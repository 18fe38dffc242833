// Prefill GEMM through cuBLAS: y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]).
//
// The same arithmetic as gemm_tc.cuh (both operands F16, sums in F32: the
// precision stated by tests/test_device_kernels.py), with cuBLAS's Hopper
// kernels doing the products: activations are rounded to F16 (saturated)
// once per pass into scratch; F16 weights are read in place, other formats
// are decoded to F16 (tc_formats.cuh, the decoders gemm_tc uses) a chunk of
// rows at a time into a scratch of at most CudaTuning::blas_chunk_mb (the
// whole matrix for most of a model's). llama.cpp takes cuBLAS for F16
// weights too; quantized formats pay a decode pass (2 bytes written and read
// per weight) that the GEMM's speed outweighs at prefill sizes.
//
// Which passes: all formats tc_formats decodes, 16 tokens or more for F16
// (nothing to decode), kMinQuantTokens or more for the rest (fewer tokens
// re-read the weights less than a decode pass costs). CudaTuning::prefill_gemm
// = tc turns this path off, = blas makes it take every pass it can.
//
// Prompt rows of batch passes (run_fixed_shape): cuBLAS picks its algorithm
// by the shape, so a row's rounding would follow how many rows share its
// pass; there every call of a matrix is fixed_rows(N) rows (zero-padded),
// its output in scratch and the real rows copied out, and the format's
// decode runs for any count.
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

constexpr uint32_t kMinQuantTokens = 128;
constexpr size_t kFixedOutputBytes = 32u << 20;  // F32 output of one fixed-shape call

// x (F32, M rows x_stride apart) -> F16 [rows][K], saturated at +-65504 as
// gemm_tc rounds; rows [M, rows) zero.
__global__ void activations_to_f16(const float* __restrict__ x, uint32_t x_stride, uint32_t M, uint32_t rows,
                                   uint32_t K, __half* __restrict__ out) {
    const size_t quads = (size_t)rows * (K / 4);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < quads; i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / (K / 4), q = i % (K / 4);
        const float4 v = t < M ? *reinterpret_cast<const float4*>(x + t * x_stride + 4 * q) : float4{0, 0, 0, 0};
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

// y rows [0, m) (y_stride apart) = ys [m][n] (+ bias): a fixed-shape call's real rows.
__global__ void store_rows(const float* __restrict__ ys, uint32_t n, uint32_t m, float* __restrict__ y,
                           uint32_t y_stride, const float* __restrict__ bias) {
    const size_t total = (size_t)m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / n, c = i % n;
        y[t * y_stride + c] = bias ? ys[i] + bias[c] : ys[i];
    }
}

// Rows of every fixed-shape call of an N-row matrix: 256 (a pass of 512
// prompt rows is two calls); 32 for output heads (N > 32768), whose prompt
// rows are the few that draw a token.
uint32_t fixed_rows(uint32_t N) { return N > 32768 ? 32 : 256; }

// Bytes of decoded F16 weight rows per GEMM call.
size_t chunk_bytes(const CudaArgs& a) { return (size_t)a.tuning->blas_chunk_mb << 20; }

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

// fn(r0, rows, w) for each chunk of `chunk` rows of W as F16: in place for
// F16 (dec nullptr), else decoded into wh first.
template <class Fn>
void for_each_f16_chunk(const CudaArgs& a, const MatmulParams& p, Decoder dec, uint32_t chunk, __half* wh, Fn&& fn) {
    const uint8_t* W = a.b<uint8_t>(0);
    for (uint32_t r0 = 0; r0 < p.N; r0 += chunk) {
        const uint32_t rows = std::min(chunk, p.N - r0);
        const __half* w = reinterpret_cast<const __half*>(W) + (size_t)r0 * p.K;
        if (dec) {
            dec<<<grid_for((size_t)rows * p.K / 16), 256, 0, a.stream>>>(W, p.K, r0, rows, wh);
            w = wh;
        }
        fn(r0, rows, w);
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
    for (void* b : buf_) cudaFree(b);
}

void* BlasGemm::scratch(int which, size_t bytes) {
    if (bytes_[which] >= bytes) return buf_[which];
    cudaFree(buf_[which]);  // waits for the kernels that read it
    buf_[which] = nullptr;
    bytes_[which] = 0;
    if (cudaMalloc(&buf_[which], bytes) != cudaSuccess) {
        cudaGetLastError();
        buf_[which] = nullptr;
        return nullptr;
    }
    bytes_[which] = bytes;
    return buf_[which];
}

// What both paths need of a pass: K in whole 32s, float4 activation rows, a
// format with an F16 decoder, no stream capture (no allocation or handle
// creation inside a graph), and the handle on the pass's stream.
bool BlasGemm::usable(const CudaArgs& a, const MatmulParams& p, const float* x) {
    if (p.N == 0 || p.K == 0 || p.K % 32 != 0) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    Decoder dec;
    if (!decoder_for(p, reinterpret_cast<uintptr_t>(a.buf[0]), &dec)) return false;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(a.stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone)
        return false;
    if (!handle_) check_blas(lib_->create(&handle_), "handle creation");
    check_blas(lib_->set_stream(handle_, a.stream), "set stream");
    return true;
}

// y[t][n] (rows ldc apart) = w[n] . x[t] for n < rows, t < M: in cuBLAS's
// column-major view y^T (rows x M) = (w^T)^T (K x rows, transposed) * x^T (K x M).
void BlasGemm::gemm(uint32_t rows, uint32_t M, uint32_t K, const __half* w, const __half* x, float* y, uint32_t ldc) {
    const float one = 1.0f, zero = 0.0f;
    check_blas(lib_->gemm_ex(handle_, CublasLibrary::kOpT, CublasLibrary::kOpN, (int)rows, (int)M, (int)K, &one, w,
                             CUDA_R_16F, (int)K, x, CUDA_R_16F, (int)K, &zero, y, CUDA_R_32F, (int)ldc,
                             CublasLibrary::kCompute32F, CublasLibrary::kGemmDefault),
               "GEMM");
}

bool BlasGemm::run(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    const uint32_t M = p.n_tokens, N = p.N, K = p.K;
    if (M < 16 || !usable(a, p, x)) return false;
    Decoder dec;
    decoder_for(p, reinterpret_cast<uintptr_t>(a.buf[0]), &dec);
    if (dec && M < kMinQuantTokens && !every_pass_) return false;
    // Rows per GEMM call: the whole matrix for F16, else chunks of ~blas_chunk_mb (multiples of 128 rows).
    uint32_t chunk = N;
    if (dec) {
        const size_t fit = chunk_bytes(a) / ((size_t)K * sizeof(__half));
        chunk = (uint32_t)std::min<size_t>(N, std::max<size_t>(128, fit / 128 * 128));
    }
    auto* xh = static_cast<__half*>(scratch(0, (size_t)M * K * sizeof(__half)));
    auto* wh = dec ? static_cast<__half*>(scratch(1, (size_t)chunk * K * sizeof(__half))) : nullptr;
    if (!xh || (dec && !wh)) return false;  // out of memory: the other kernels need no scratch

    activations_to_f16<<<grid_for((size_t)M * K / 4), 256, 0, a.stream>>>(x, p.x_stride, M, M, K, xh);
    for_each_f16_chunk(a, p, dec, chunk, wh, [&](uint32_t r0, uint32_t rows, const __half* w) {
        gemm(rows, M, K, w, xh, y + r0, p.y_stride);
    });
    if (p.has_bias) add_bias<<<grid_for((size_t)M * N), 256, 0, a.stream>>>(y, p.y_stride, M, N, a.b<float>(3));
    return true;
}

bool BlasGemm::run_fixed_shape(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    const uint32_t M = p.n_tokens, N = p.N, K = p.K;
    if (!usable(a, p, x)) return false;
    if (M == 0) return true;
    Decoder dec;
    decoder_for(p, reinterpret_cast<uintptr_t>(a.buf[0]), &dec);
    const uint32_t S = fixed_rows(N);
    const uint32_t slices = (M + S - 1) / S;
    // Weight rows a call: bounded by the output scratch, and by blas_chunk_mb of
    // decoded rows for formats other than F16; a function of N, K and the tuning alone.
    size_t fit = kFixedOutputBytes / ((size_t)S * sizeof(float));
    if (dec) fit = std::min(fit, chunk_bytes(a) / ((size_t)K * sizeof(__half)));
    const uint32_t chunk = (uint32_t)std::min<size_t>(N, std::max<size_t>(128, fit / 128 * 128));
    auto* xh = static_cast<__half*>(scratch(0, (size_t)slices * S * K * sizeof(__half)));
    auto* wh = dec ? static_cast<__half*>(scratch(1, (size_t)chunk * K * sizeof(__half))) : nullptr;
    auto* ys = static_cast<float*>(scratch(2, (size_t)S * chunk * sizeof(float)));
    // Out of memory is an error, not a fall back to gemm_tc: the scratch grows
    // with the pass, so a fallback would give a row two paths by its company.
    if (!xh || (dec && !wh) || !ys)
        throw Error("CUDA: out of GPU memory for the scratch of a prompt-row GEMM (" + std::to_string(M) + " x " +
                    std::to_string(K) + "); load with a smaller KV budget");

    // every slice's activations, rows past M zero
    activations_to_f16<<<grid_for((size_t)slices * S * K / 4), 256, 0, a.stream>>>(x, p.x_stride, M, slices * S, K,
                                                                                   xh);
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    for_each_f16_chunk(a, p, dec, chunk, wh, [&](uint32_t r0, uint32_t rows, const __half* w) {
        for (uint32_t s0 = 0; s0 < M; s0 += S) {
            gemm(rows, S, K, w, xh + (size_t)s0 * K, ys, rows);
            const uint32_t m = std::min(S, M - s0);
            store_rows<<<grid_for((size_t)m * rows), 256, 0, a.stream>>>(ys, rows, m, y + (size_t)s0 * p.y_stride + r0,
                                                                         p.y_stride, bias ? bias + r0 : nullptr);
        }
    });
    return true;
}

}  // namespace akunu
