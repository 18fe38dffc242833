// GEMV / GEMM (gemv_<format>, gemm_<format>) for every weight format: a few
// tokens take the decode GEMV (gemv.cuh), 16 or more the tensor cores for the
// common GGUF formats (cuBLAS, gemm_blas.cu, where it loads; else
// gemm_tc.cuh); everything else runs here in float (row kernels, and a
// shared-memory tiled GEMM). Batch tables choose a path per row kind, not
// per pass size (launch_matmul_invariant). Weights are decoded block by
// block with the functions that define the formats on the CPU
// (core/quant_blocks.h).
#include <algorithm>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "core/quant_blocks.h"
#include "cuda_kernel.h"
#include "decode_block.cuh"
#include "gemm_blas.h"
#include "gemm_rows.cuh"
#include "gemm_rows_half.cuh"
#include "gemm_rows_q8.cuh"
#include "gemm_rows_kq.cuh"
#include "gemm_tc.cuh"
#include "gemv.cuh"

namespace akunu {
namespace {

constexpr int kMaxTokens = 64;

// y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]); one warp per row n.
__global__ void matmul_kernel(MatmulParams p, DecodeUnit g, const uint8_t* W, const float* x, float* y,
                              const float* bias) {
    const int warp = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
    const int lane = threadIdx.x % 32;
    if (warp >= (int)p.N) return;
    const int nb = (int)p.K / g.elems;
    const uint8_t* row = W + (size_t)warp * nb * g.bytes;
    float acc[kMaxTokens];
    const int m = (int)p.n_tokens;
    for (int t = 0; t < m; t++) acc[t] = 0.0f;
    float tmp[kMaxBlockElems];
    for (int b = lane; b < nb; b += 32) {
        decode_unit(p.dtype, row, b, g.bytes, tmp);
        for (int t = 0; t < m; t++) {
            const float* xb = x + (size_t)t * p.x_stride + (size_t)b * g.elems;
            float s = 0.0f;
            for (int j = 0; j < g.elems; j++) s += tmp[j] * xb[j];
            acc[t] += s;
        }
    }
    for (int t = 0; t < m; t++) {
        float v = acc[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[(size_t)t * p.y_stride + warp] = v + (bias ? bias[warp] : 0.0f);
    }
}

// Half-precision rows (F16 / BF16) with 16-byte loads: each lane reads 8
// weights at a time, so a warp streams 512 contiguous bytes per step.
template <bool Bf16>
__device__ float half8_dot(uint4 w, const float* x) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) s += (Bf16 ? bf16_to_f32(h[j]) : f16_to_f32(h[j])) * x[j];
    return s;
}

template <bool Bf16>
__global__ void matmul_half_kernel(MatmulParams p, const uint8_t* W, const float* x, float* y, const float* bias) {
    const int warp = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
    const int lane = threadIdx.x % 32;
    if (warp >= (int)p.N) return;
    const uint4* row = reinterpret_cast<const uint4*>(W + (size_t)warp * p.K * 2);
    const int n8 = (int)p.K / 8;
    const int m = (int)p.n_tokens;
    float acc[kMaxTokens];
    for (int t = 0; t < m; t++) acc[t] = 0.0f;
    for (int i = lane; i < n8; i += 32) {
        const uint4 w = row[i];
        for (int t = 0; t < m; t++) acc[t] += half8_dot<Bf16>(w, x + (size_t)t * p.x_stride + (size_t)i * 8);
    }
    for (int t = 0; t < m; t++) {
        float v = acc[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[(size_t)t * p.y_stride + warp] = v + (bias ? bias[warp] : 0.0f);
    }
}

// 32-element block formats with the block size and decoder fixed at compile
// time: the decoded block lives in registers instead of local memory.
template <void (*Dec)(const uint8_t*, float*), int BB>
__global__ void matmul_q32_kernel(MatmulParams p, const uint8_t* W, const float* x, float* y, const float* bias) {
    const int warp = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
    const int lane = threadIdx.x % 32;
    if (warp >= (int)p.N) return;
    const int nb = (int)p.K / 32;
    const uint8_t* row = W + (size_t)warp * nb * BB;
    const int m = (int)p.n_tokens;
    float acc[kMaxTokens];
    for (int t = 0; t < m; t++) acc[t] = 0.0f;
    for (int b = lane; b < nb; b += 32) {
        float tmp[32];
        Dec(row + (size_t)b * BB, tmp);
        for (int t = 0; t < m; t++) {
            const float4* xb = reinterpret_cast<const float4*>(x + (size_t)t * p.x_stride + (size_t)b * 32);
            float s = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float4 v = xb[j];
                s += tmp[4 * j] * v.x + tmp[4 * j + 1] * v.y + tmp[4 * j + 2] * v.z + tmp[4 * j + 3] * v.w;
            }
            acc[t] += s;
        }
    }
    for (int t = 0; t < m; t++) {
        float v = acc[t];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[(size_t)t * p.y_stride + warp] = v + (bias ? bias[warp] : 0.0f);
    }
}

using MatmulKernel = void (*)(MatmulParams, const uint8_t*, const float*, float*, const float*);

// The specialized kernel for a 32-block format, or nullptr.
MatmulKernel q32_kernel(uint32_t dtype) {
    switch (dtype) {
        case GGML_Q8_0: return matmul_q32_kernel<blocks::dequant_q8_0, 34>;
        case GGML_Q4_0: return matmul_q32_kernel<blocks::dequant_q4_0, 18>;
        case GGML_Q4_1: return matmul_q32_kernel<blocks::dequant_q4_1, 20>;
        case GGML_Q5_0: return matmul_q32_kernel<blocks::dequant_q5_0, 22>;
        case GGML_Q5_1: return matmul_q32_kernel<blocks::dequant_q5_1, 24>;
        case GGML_IQ4_NL: return matmul_q32_kernel<blocks::dequant_iq4_nl, 18>;
        case GGML_MXFP4: return matmul_q32_kernel<blocks::dequant_mxfp4, 17>;
        default: return nullptr;
    }
}

// The row kernels for one pass of at most kMaxTokens tokens. Each token has
// its own accumulator, lanes take blocks b = lane, lane + 32, ... whatever
// the count, and the kernel chosen depends on the format, K and alignment
// only: a row's result does not depend on the other rows.
void launch_row_kernels(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    const unsigned warps = 8;
    const bool half = (p.dtype == GGML_F16 || p.dtype == GGML_BF16) && p.K % 8 == 0 &&
                      (reinterpret_cast<uintptr_t>(a.buf[0]) & 15) == 0;
    const bool x_aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0 && p.x_stride % 4 == 0;
    if (MatmulKernel k = x_aligned ? q32_kernel(p.dtype) : nullptr) {
        k<<<blocks_for(p.N, warps), warps * 32, 0, a.stream>>>(p, a.b<uint8_t>(0), x, y, bias);
        return;
    }
    if (half && p.dtype == GGML_F16)
        matmul_half_kernel<false><<<blocks_for(p.N, warps), warps * 32, 0, a.stream>>>(p, a.b<uint8_t>(0), x,
                                                                                      y, bias);
    else if (half)
        matmul_half_kernel<true><<<blocks_for(p.N, warps), warps * 32, 0, a.stream>>>(p, a.b<uint8_t>(0), x,
                                                                                     y, bias);
    else
        matmul_kernel<<<blocks_for(p.N, warps), warps * 32, 0, a.stream>>>(p, decode_unit_for(p.dtype, "CUDA matmul"), a.b<uint8_t>(0),
                                                                          x, y, bias);
}

// One pass of at most kMaxTokens tokens.
void launch_matmul_slice(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    if (!launch_gemv(a, p, x, y)) launch_row_kernels(a, p, x, y);
}

// Many-token passes (prefill, encoder sequences): a shared-memory tiled GEMM.
// A block computes 32 rows x 64 tokens; per step it loads a 32 x BK tile of
// W (BK = 32 or the format's block length; quantized blocks through the
// formats' own decoders) and the matching 64 x BK tile of x, then each thread
// accumulates 2 x 4 outputs (tokens strided by 16: conflict-free reads). No tensor cores yet: this replaces the GEMV-shaped kernels, whose
// per-token accumulators spilled to local memory.
constexpr int kTileRows = 32;    // rows of W (output features) per block: more blocks on small matrices
constexpr int kTileTokens = 64;  // tokens per block
constexpr int kTiledMinTokens = 16;  // below this (decode, speculative verification) the row kernels run

// One W element of a float format, or 0 past the last row.
__device__ float load_float_weight(uint32_t dtype, const uint8_t* W, size_t idx) {
    if (dtype == GGML_F32) return reinterpret_cast<const float*>(W)[idx];
    const uint16_t h = reinterpret_cast<const uint16_t*>(W)[idx];
    return dtype == GGML_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

__global__ void gemm_tiled_kernel(MatmulParams p, DecodeUnit g, int bk, const uint8_t* W, const float* x, float* y,
                                  const float* bias) {
    extern __shared__ float smem[];
    const int ld = bk + 1;  // padded rows: fewer bank conflicts
    float* ws = smem;                   // [kTileRows][ld] weights
    float* xs = smem + kTileRows * ld;  // [kTileTokens][ld] activations
    const int n0 = blockIdx.x * kTileRows, t0 = blockIdx.y * kTileTokens;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const bool float_format = g.elems == 1;
    const int nb_row = (int)p.K / g.elems;     // blocks per weight row
    const int blocks_per_tile = bk / g.elems;  // blocks per tile row
    float acc[2][4] = {};
    for (int k0 = 0; k0 < (int)p.K; k0 += bk) {
        if (float_format) {  // coalesced along k
            for (int j = tid; j < kTileRows * bk; j += blockDim.x) {
                const int r = j / bk, k = j % bk;
                ws[r * ld + k] = n0 + r < (int)p.N && k0 + k < (int)p.K  // float K may end mid-tile
                                     ? load_float_weight(p.dtype, W, (size_t)(n0 + r) * p.K + k0 + k)
                                     : 0.0f;
            }
        } else {
            for (int j = tid; j < kTileRows * blocks_per_tile; j += blockDim.x) {
                const int r = j / blocks_per_tile, b = j % blocks_per_tile;
                float* dst = ws + r * ld + b * g.elems;
                if (n0 + r < (int)p.N)
                    decode_unit(p.dtype, W + (size_t)(n0 + r) * nb_row * g.bytes, k0 / g.elems + b, g.bytes, dst);
                else
                    for (int e = 0; e < g.elems; e++) dst[e] = 0.0f;
            }
        }
        for (int j = tid; j < kTileTokens * bk; j += blockDim.x) {
            const int t = j / bk, k = j % bk;
            xs[t * ld + k] = t0 + t < (int)p.n_tokens && k0 + k < (int)p.K ? x[(size_t)(t0 + t) * p.x_stride + k0 + k]
                                                                            : 0.0f;
        }
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < bk; k++) {
            float wv[2], xv[4];
            for (int i = 0; i < 2; i++) wv[i] = ws[(ty * 2 + i) * ld + k];
            for (int i = 0; i < 4; i++) xv[i] = xs[(tx + 16 * i) * ld + k];
            for (int i = 0; i < 2; i++)
                for (int c = 0; c < 4; c++) acc[i][c] += wv[i] * xv[c];
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; i++) {
        const int n = n0 + ty * 2 + i;
        if (n >= (int)p.N) continue;
        for (int c = 0; c < 4; c++) {
            const int t = t0 + tx + 16 * c;
            if (t < (int)p.n_tokens) y[(size_t)t * p.y_stride + n] = acc[i][c] + (bias ? bias[n] : 0.0f);
        }
    }
}

void launch_gemm_tiled(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    const DecodeUnit g = decode_unit_for(p.dtype, "CUDA matmul");
    const int bk = g.elems < 32 ? 32 : g.elems;
    if (g.elems > 1 && p.K % bk != 0)  // float formats take any K (the last tile is zero-filled)
        throw Error("CUDA GEMM: K " + std::to_string(p.K) + " is not a multiple of " + std::to_string(bk));
    const size_t shared = (size_t)(kTileRows + kTileTokens) * (bk + 1) * sizeof(float);
    allow_dynamic_shared((const void*)gemm_tiled_kernel, (int)((kTileRows + kTileTokens) * (256 + 1) * sizeof(float)));
    dim3 grid(blocks_for(p.N, kTileRows), blocks_for(p.n_tokens, kTileTokens));
    gemm_tiled_kernel<<<grid, 256, shared, a.stream>>>(p, g, bk, a.b<uint8_t>(0), x, y,
                                                       p.has_bias ? a.b<float>(3) : nullptr);
}

// Whether decode rows of the integer formats gemm_rows_q8.cuh takes go there:
// under batch_decode=auto in engines of up to kBatchRowsMax sequences (H100,
// Llama-3.1-8B Q4_K_M, a step at 1024 tokens of context, 16 rows: 12.0 ms on
// the F16 row-side GEMM, 9.4 here; H200, with the activations staged in
// shared memory: 7.66 ms). At 64 rows the split-K 64-row tiles were faster
// (H200: 23.5 against 24.3 ms), and gemm_rows_kq.cuh is faster than both
// (half_decode_rows). Fixed per engine.
bool integer_decode_rows(const CudaTuning& t) {
    return t.batch_decode == BatchDecode::kAuto && t.batch_decode_now == BatchDecode::kRows && t.rows_kq < 2;
}

// Whether decode rows of Q4_K / Q6_K_X8 go to gemm_rows_kq.cuh (F16 decoded
// in registers): under batch_decode=auto in engines over kBatchRowsMax
// sequences (rows_kq=1; H200, Llama-3.1-8B Q4_K_M, a 64-row step at 1024
// tokens of context: 15.9 ms, 18.5 on the 64-row tiles), or in every engine
// (rows_kq=2; 16 rows: 5.82 ms, 6.34 on gemm_rows_q8.cuh). Fixed per engine.
bool half_decode_rows(const CudaTuning& t) {
    if (t.batch_decode != BatchDecode::kAuto) return false;
    return t.rows_kq == 2 || (t.rows_kq == 1 && t.batch_decode_now == BatchDecode::kTc);
}

// batch_decode=rows: F16 / BF16 weights on the row-side GEMM that loads its
// fragments from global memory (gemm_rows_half.cuh; H200, Llama-3.2-1B F16,
// a batch step of 1 / 4 / 16 rows: 1.75 / 1.84 / 2.33 ms through
// gemm_rows.cuh, 1.49 / 1.66 / 2.30 here), unless rows_half=0; other
// formats on gemm_rows.cuh.
bool launch_decode_rows(const CudaArgs& a, const MatmulParams& p, const float* x, const gemm_tc::Segments& sg) {
    return (a.tuning->rows_half && launch_gemm_rows_half(a, p, x, sg)) || launch_gemm_rows(a, p, x, sg);
}

// Batch tables (MatmulParams::invariant): a row's result may depend on its
// kind and data only, never on n_tokens or the other rows, so the path is
// chosen per kind, not by the pass's size. Decode rows [0, generated_rows):
// in small engines the integer row-side GEMM where it takes the format
// (Q4_K, Q6_K_X8: gemm_rows_q8.cuh, integer_decode_rows), in larger ones
// those formats decoded to F16 in registers (gemm_rows_kq.cuh,
// half_decode_rows), else
// the row-side tensor-core GEMM (batch_decode=rows, gemm_rows.cuh), the
// split-K prompt GEMM (batch_decode=tc), or the decode GEMV in slices of
// kGemvMaxTokens (its pinned instantiation, see gemv.cuh); for formats none
// takes, the row kernels, in slices too.
// Prompt rows: cuBLAS in calls of one fixed shape a matrix where it loads
// (BlasGemm::run_fixed_shape: its algorithm follows the shape, so the shape
// never follows the pass), else the tensor-core GEMM for any count, one row
// included (its tile pinned by N and K, gemm_tc.cuh), or the row kernels in
// slices of kMaxTokens. Never the float tiled GEMM (it rounds unlike the
// row kernels, so a format would take two paths by count).
void launch_matmul_invariant(const CudaArgs& a, MatmulParams p, const float* x, float* y) {
    const uint32_t total = p.n_tokens;
    const uint32_t generated = std::min(p.generated_rows, total);
    if (a.tuning->batch_decode_now != BatchDecode::kGemv) {
        // rows / tc: decode rows take the tensor cores, one weight read for 64 rows
        if (generated > 0) {
            p.n_tokens = generated;
            const gemm_tc::Segments one = gemm_tc::one_segment(a, p, y, p.has_bias ? a.b<float>(3) : nullptr);
            const bool done = (integer_decode_rows(*a.tuning) && launch_gemm_rows_q8(a, p, x, one)) ||
                              (half_decode_rows(*a.tuning) && launch_gemm_rows_kq(a, p, x, one)) ||
                              (a.tuning->batch_decode_now == BatchDecode::kRows
                                   ? launch_decode_rows(a, p, x, one)
                                   : launch_gemm_tc(a, p, x, y, /*decode_rows=*/true));
            if (!done)
                for (uint32_t t0 = 0; t0 < generated; t0 += kMaxTokens) {
                    p.n_tokens = std::min<uint32_t>(kMaxTokens, generated - t0);
                    launch_row_kernels(a, p, x + (size_t)t0 * p.x_stride, y + (size_t)t0 * p.y_stride);
                }
        }
    } else {
        for (uint32_t t0 = 0; t0 < generated; t0 += kGemvMaxTokens) {
            p.n_tokens = std::min<uint32_t>(kGemvMaxTokens, generated - t0);
            const float* xs = x + (size_t)t0 * p.x_stride;
            float* ys = y + (size_t)t0 * p.y_stride;
            if (!launch_gemv(a, p, xs, ys)) launch_row_kernels(a, p, xs, ys);
        }
    }
    if (generated == total) return;
    x += (size_t)generated * p.x_stride;
    y += (size_t)generated * p.y_stride;
    p.n_tokens = total - generated;
    if ((a.blas && a.blas->run_fixed_shape(a, p, x, y)) || launch_gemm_tc(a, p, x, y)) return;
    const uint32_t prompt = p.n_tokens;
    for (uint32_t t0 = 0; t0 < prompt; t0 += kMaxTokens) {
        p.n_tokens = std::min<uint32_t>(kMaxTokens, prompt - t0);
        launch_row_kernels(a, p, x + (size_t)t0 * p.x_stride, y + (size_t)t0 * p.y_stride);
    }
}

// 16 tokens or more: the tensor cores where gemm_tc.cuh takes the format, else
// the float tiled GEMM or the row kernels; fewer: the row kernels (slices of
// kMaxTokens kept for safety). Batch tables: launch_matmul_invariant.
void launch_matmul(const CudaArgs& a) {
    MatmulParams p = a.p<MatmulParams>();
    const float* x = a.b<float>(1) + (size_t)p.row0 * p.x_stride;
    float* y = a.b<float>(2);
    if (p.invariant) {
        launch_matmul_invariant(a, p, x, y);
        return;
    }
    // Outside the tensor-core formats, those with a specialized row kernel
    // (16-byte half loads, 32-blocks decoded in registers) are faster than
    // the float tiled GEMM.
    const bool half = (p.dtype == GGML_F16 || p.dtype == GGML_BF16) && p.K % 8 == 0 &&
                      (reinterpret_cast<uintptr_t>(a.buf[0]) & 15) == 0;
    const bool q32 = (reinterpret_cast<uintptr_t>(x) & 15) == 0 && p.x_stride % 4 == 0 && q32_kernel(p.dtype);
    // The common GGUF formats take the tensor cores: through cuBLAS where it
    // loaded and takes the pass (gemm_blas.cu), else gemm_tc.cuh.
    if (p.n_tokens >= (uint32_t)kTiledMinTokens &&
        ((a.blas && a.blas->run(a, p, x, y)) || launch_gemm_tc(a, p, x, y)))
        return;
    if (p.n_tokens >= (uint32_t)kTiledMinTokens && !half && !q32) {
        launch_gemm_tiled(a, p, x, y);
        return;
    }
    const uint32_t total = p.n_tokens;
    for (uint32_t t0 = 0; t0 < total; t0 += kMaxTokens) {
        p.n_tokens = std::min<uint32_t>(kMaxTokens, total - t0);
        launch_matmul_slice(a, p, x + (size_t)t0 * p.x_stride, y + (size_t)t0 * p.y_stride);
    }
}

// matmul_multi (batch tables: q, k, v or gate, up): the decode rows of every
// matrix in one launch of the decode-row tensor-core GEMM (gemm_rows.cuh, or
// gemm_tc.cuh's split-K one) where it takes the format (the split from the
// launch's total columns and K: fixed per model, so a row's sums keep their
// order in any batch); the prompt rows, and
// formats it does not take, as each matrix's own invariant matmul.
void launch_matmul_multi(const CudaArgs& a) {
    const MultiMatmulParams m = a.p<MultiMatmulParams>();
    if (m.n_mats == 0 || m.n_mats > 3) throw Error("matmul_multi: 1 to 3 matrices, got " + std::to_string(m.n_mats));
    const float* x = a.b<float>(0);
    const uint32_t gen = std::min(m.generated_rows, m.n_tokens);
    auto params_of = [&](uint32_t i) {
        return MatmulParams{m.N[i], m.K, m.n_tokens, m.dtype, m.x_stride, m.y_stride[i], m.has_bias, 0, 1,
                            m.generated_rows};
    };
    bool decode_done = false;
    if (gen > 0 && a.tuning->batch_decode_now != BatchDecode::kGemv) {
        gemm_tc::Segments sg;
        sg.count = m.n_mats;
        for (uint32_t i = 0; i < m.n_mats; i++) {
            sg.W[i] = a.b<uint8_t>(1 + i);
            sg.y[i] = a.b<float>(4 + i);
            sg.bias[i] = m.has_bias ? a.b<float>(7 + i) : nullptr;
            sg.N[i] = m.N[i];
            sg.y_stride[i] = m.y_stride[i];
        }
        MatmulParams p = params_of(0);
        p.n_tokens = gen;
        decode_done = (integer_decode_rows(*a.tuning) && launch_gemm_rows_q8(a, p, x, sg)) ||
                      (half_decode_rows(*a.tuning) && launch_gemm_rows_kq(a, p, x, sg)) ||
                      (a.tuning->batch_decode_now == BatchDecode::kRows ? launch_decode_rows(a, p, x, sg)
                                                                        : launch_gemm_tc_split_segments(a, p, x, sg));
    }
    if (decode_done && gen == m.n_tokens) return;
    for (uint32_t i = 0; i < m.n_mats; i++) {
        MatmulParams p = params_of(i);
        CudaArgs ai = a;  // the matrix's own command: W, x, y, bias
        ai.buf[0] = a.buf[1 + i];
        ai.buf[1] = a.buf[0];
        ai.buf[2] = a.buf[4 + i];
        ai.buf[3] = a.buf[7 + i];
        std::memcpy(ai.params, &p, sizeof(p));
        float* y = a.b<float>(4 + i);
        if (!decode_done) {
            launch_matmul_invariant(ai, p, x, y);
            continue;
        }
        p.n_tokens = m.n_tokens - gen;  // the prompt rows
        p.generated_rows = 0;
        launch_matmul_invariant(ai, p, x + (size_t)gen * m.x_stride, y + (size_t)gen * m.y_stride[i]);
    }
}

}  // namespace

extern const CudaKernelEntry kCudaMatmulKernels[] = {
    {"matmul_multi", launch_matmul_multi},
#define AKUNU_FORMAT(fmt) {"gemv_" #fmt, launch_matmul}, {"gemm_" #fmt, launch_matmul},
    AKUNU_FORMAT(f32) AKUNU_FORMAT(f16) AKUNU_FORMAT(bf16) AKUNU_FORMAT(q8_0) AKUNU_FORMAT(q4_0)
    AKUNU_FORMAT(q4_1) AKUNU_FORMAT(q5_0) AKUNU_FORMAT(q5_1) AKUNU_FORMAT(q2_k) AKUNU_FORMAT(q3_k)
    AKUNU_FORMAT(q4_k) AKUNU_FORMAT(q5_k) AKUNU_FORMAT(q6_k) AKUNU_FORMAT(iq4_nl) AKUNU_FORMAT(iq4_xs)
    AKUNU_FORMAT(mlx) AKUNU_FORMAT(q4_0_x8) AKUNU_FORMAT(q8_0_x8) AKUNU_FORMAT(q6_k_x8)
    AKUNU_FORMAT(mxfp4)
#undef AKUNU_FORMAT
    {nullptr, nullptr},
};

}  // namespace akunu
