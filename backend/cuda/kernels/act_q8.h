// Decode activations rounded to 8 bits for the integer (dp4a) GEMVs, as
// llama.cpp's CUDA backend feeds its quantized mat-vec kernels: per 32 values
// d = amax / 127 and q = round(x / d), ties to even, d then kept to F16
// precision (the CPU's Q8_0 rounding exactly); d * sum(q) rides along
// for the formats whose blocks carry an offset or a min. A float activation
// costs the decode GEMV four times its bytes from L1 and a conversion per
// weight; an int8 one is a quarter of that and four weights per instruction.
#pragma once
#include <cstdint>

#include "cuda_kernel.h"

namespace akunu {

constexpr int kQ8Block = 32;
// The fewest values one of ActQ8::sumsq's sums of squares may cover (a float
// residual writer whose rows are split over 4 warps: 8 rows a block).
constexpr int kMinSumsqRows = 8;

// Where the rounding of m tokens of K values lies in half `half` (0 or 1) of
// the device's activation scratch; false when it does not fit (or K is not a
// multiple of 32). A command rounds its own input into half 0; a Q8Link's
// writer writes the other half from the one it reads (CudaDevice::launch_commands).
bool act_q8_layout(const CudaArgs& a, uint32_t m, uint32_t K, int half, ActQ8* out);

// Room after that rounding (out as act_q8_layout gave it) for the sums of
// squares of a rounding done ahead of its norm's scale (ActQ8::sumsq; one
// token); false when it does not fit.
bool act_q8_sumsq_layout(const CudaArgs& a, uint32_t m, uint32_t K, int half, float eps, ActQ8* out);

// The same for m tokens of K floats (a float reader's Q8Link); with sumsq,
// also room after them for K / kMinSumsqRows sums of squares (one token).
bool act_f32_layout(const CudaArgs& a, uint32_t m, uint32_t K, int half, float** out, float** sumsq = nullptr);

// Enqueues the rounding of m tokens of x (row stride x_stride floats, x
// 16-byte aligned) into the device's activation scratch. False (nothing
// enqueued) when K is not a multiple of 32, x is misaligned, or the scratch
// is too small.
bool quantize_activations(const CudaArgs& a, const float* x, uint32_t x_stride, uint32_t m, uint32_t K,
                          const ActQ8Norm& norm, ActQ8* out);

// Enqueues the RMSNorm of m tokens of x (row stride K) into the scratch as
// floats (the float-activation GEMVs' input); false when it does not fit.
bool normalize_activations(const CudaArgs& a, const float* x, uint32_t m, uint32_t K, const ActQ8Norm& norm,
                           float** out);

}  // namespace akunu
