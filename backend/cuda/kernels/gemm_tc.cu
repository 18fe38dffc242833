// Tensor-core GEMM for many-token passes (prefill): y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]).
//
// A block computes BM tokens x BN weight rows: 128 x 128 where one wave of
// such blocks nearly fills the GPU, else 64 x 128 or 64 x 64 (launch()).
// Per 64-wide k step (32 for K not a multiple of 64) it stages in shared
// memory the activations, rounded to F16 (saturated at +-65504), and the
// weights, decoded from their format to F16; its 2 x BN/32 warps then run
// 16x16x16 WMMA products (F16 operands, F32 accumulation), BM/2 x 32 outputs
// per warp. Double-buffered: the next step's global loads are in flight, raw,
// in registers while the tensor cores work on the current step, so each
// format is split into `load` (global memory -> raw registers) and `store`
// (raw -> 16 decoded F16 weights in shared memory). A thread owns 16-element
// units of one weight row (BN rows x 2 per 32 of k = 2 BN threads).
//
// Precision: both operands are F16 (11 significant bits), sums are F32 — as
// llama.cpp's cuBLAS path for F16 weights; tests/test_device_kernels.py states
// the bound. The formats' meaning is core/quant_blocks.h (the CPU twin).
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdlib>

#include "core/dtype_descriptor.h"
#include "gemm_tc.h"
#include "gemv_formats.cuh"
#include "mma.cuh"

namespace akunu {
namespace {

using namespace nvcuda;
using gemv_formats::ld_u16;
using gemv_formats::ld_u32_from_u16;
using gemv_formats::small_int;  // exact integer -> float on the FP32 pipes

constexpr int kMinBK = 32;     // k per step: 32 or 64 (a multiple of every format's unit pair)
constexpr int kWarpTile = 32;   // a warp's outputs: BM / 2 tokens x 32 rows
constexpr int kCld = kWarpTile + 4;  // floats per row of a warp's output staging

// Eight floats as eight F16 values in one 16-byte shared-memory store.
__device__ __forceinline__ void store8(__half* dst, const float* v) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]),
                                                pack_half2(v[4], v[5]), pack_half2(v[6], v[7]));
}

__device__ __forceinline__ float f16_bits(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }

// --- formats: load one 16-element unit (u = 0 or 1) of the 32-wide k step at k0, then decode it ---

struct TcF16 {
    static constexpr int kElems = 1, kBytes = 2;
    struct Raw {
        uint4 a, b;
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint4* p = reinterpret_cast<const uint4*>(row + (size_t)(k0 + 16 * u) * 2);
        return {p[0], p[1]};
    }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        reinterpret_cast<uint4*>(dst + 16 * u)[0] = r.a;
        reinterpret_cast<uint4*>(dst + 16 * u)[1] = r.b;
    }
};

struct TcBF16 : TcF16 {
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const uint32_t w[8] = {r.a.x, r.a.y, r.a.z, r.a.w, r.b.x, r.b.y, r.b.z, r.b.w};
        float v[16];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
        }
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

struct TcF32 {
    static constexpr int kElems = 1, kBytes = 4;
    struct Raw {
        float4 v[4];
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const float4* p = reinterpret_cast<const float4*>(row + (size_t)(k0 + 16 * u) * 4);
        return {{p[0], p[1], p[2], p[3]}};
    }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const float* v = reinterpret_cast<const float*>(r.v);
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

// n (2 or 4) 32-bit words starting at a 2-byte aligned address: aligned
// loads, shifted by 16 bits when the address is not 4-byte aligned (the
// last half-word read alone, so nothing past the bytes asked for is read).
template <int W>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t* out) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if ((a & 3) == 0) {
#pragma unroll
        for (int i = 0; i < W; i++) out[i] = reinterpret_cast<const uint32_t*>(p)[i];
    } else {
        const uint32_t* w = reinterpret_cast<const uint32_t*>(a - 2);
        uint32_t v[W + 1];
#pragma unroll
        for (int i = 0; i < W; i++) v[i] = w[i];
        v[W] = ld_u16(p + 4 * W - 2);
#pragma unroll
        for (int i = 0; i < W; i++) out[i] = __funnelshift_r(v[i], v[i + 1], 16);
    }
}

// The 32-block formats decode in half pairs: an integer v < 1024 OR-ed into
// the mantissa of 1024.0 (0x6400) is 1024 + v exactly; subtracting the
// offset and multiplying by d (F16) rounds once, to the value the float
// path would round to (d * q is exact in float).
__device__ __forceinline__ uint32_t scaled_pair(uint32_t biased, __half2 offset, __half2 d) {
    return half2_bits(__hmul2(__hsub2(as_half2(biased), offset), d));
}

// A 32-block with an F16 d first (Q8_0, Q4_0): d and W words of quants
// from byte `at` of the block holding element k0.
template <int W>
struct DQuants {
    uint32_t d, q[W];
};
template <int W, int Bytes>
__device__ __forceinline__ DQuants<W> load_d_quants(const uint8_t* row, int k0, int at) {
    const uint8_t* blk = row + (size_t)(k0 / 32) * Bytes;
    DQuants<W> r;
    r.d = ld_u16(blk);
    load_words<W>(blk + at, r.q);
    return r;
}

// Q8_0: f16 d, int8 q[32]; a unit is q[16u .. 16u + 16).
struct TcQ8_0 {
    static constexpr int kElems = 32, kBytes = 34;
    using Raw = DQuants<4>;
    __device__ static Raw load(const uint8_t* row, int k0, int u) { return load_d_quants<4, kBytes>(row, k0, 2 + 16 * u); }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const __half2 d = __half2half2(__ushort_as_half((unsigned short)r.d));
        const __half2 offset = __float2half2_rn(1152.0f);  // 1024 + the 128 of int8 -> biased byte
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t b = r.q[i] ^ 0x80808080u;  // bytes q + 128
            h[2 * i] = scaled_pair(__byte_perm(b, 0x64646464u, 0x4140), offset, d);
            h[2 * i + 1] = scaled_pair(__byte_perm(b, 0x64646464u, 0x4342), offset, d);
        }
        reinterpret_cast<uint4*>(dst + 16 * u)[0] = make_uint4(h[0], h[1], h[2], h[3]);
        reinterpret_cast<uint4*>(dst + 16 * u)[1] = make_uint4(h[4], h[5], h[6], h[7]);
    }
};

// Q4_0: f16 d, nibbles q[16] (low: elements 0..15, high: 16..31); a unit is
// bytes q[8u .. 8u + 8): elements 8u.. (low) and 16 + 8u.. (high).
struct TcQ4_0 {
    static constexpr int kElems = 32, kBytes = 18;
    using Raw = DQuants<2>;
    __device__ static Raw load(const uint8_t* row, int k0, int u) { return load_d_quants<2, kBytes>(row, k0, 2 + 8 * u); }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const __half2 d = __half2half2(__ushort_as_half((unsigned short)r.d));
        const __half2 offset = __float2half2_rn(1032.0f);  // 1024 + the 8 of the format
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 2; j++) {  // bytes 2j, 2j + 1 of word i, one per half
                const uint32_t t = __byte_perm(r.q[i], 0, j ? 0x4342 : 0x4140);
                lo[2 * i + j] = scaled_pair((t & 0x000F000Fu) | 0x64006400u, offset, d);
                hi[2 * i + j] = scaled_pair(((t >> 4) & 0x000F000Fu) | 0x64006400u, offset, d);
            }
        *reinterpret_cast<uint4*>(dst + 8 * u) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        *reinterpret_cast<uint4*>(dst + 16 + 8 * u) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    }
};

// Byte i of the 12 scale bytes held as three words.
__device__ __forceinline__ uint32_t scale_byte(uint32_t s0, uint32_t s1, uint32_t s2, int i) {
    const uint32_t w = i < 4 ? s0 : (i < 8 ? s1 : s2);
    return (w >> (8 * (i & 3))) & 0xFF;
}

// Q4_K: 256-element super-block; k step j = 0..7 is 32 elements with 6-bit
// scale/min j, nibbles (low for even j, high for odd) of bytes q[32 (j / 2) ..].
struct TcQ4_K {
    static constexpr int kElems = 256, kBytes = 144;
    struct Raw {
        uint32_t dd, s0, s1, s2;
        uint4 q;
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* blk = row + (size_t)(k0 / 256) * kBytes;
        const int j = (k0 % 256) / 32;
        const uint4 head = *reinterpret_cast<const uint4*>(blk);  // d, dmin, 12 scale bytes
        return {head.x, head.y, head.z, head.w, *reinterpret_cast<const uint4*>(blk + 16 + 32 * (j / 2) + 16 * u)};
    }
    __device__ static void store(const Raw& r, __half* dst, int k0, int u) {
        const int j = (k0 % 256) / 32;
        uint32_t sc, m;
        if (j < 4) {
            sc = scale_byte(r.s0, r.s1, r.s2, j) & 63;
            m = scale_byte(r.s0, r.s1, r.s2, j + 4) & 63;
        } else {
            sc = (scale_byte(r.s0, r.s1, r.s2, j + 4) & 0xF) | ((scale_byte(r.s0, r.s1, r.s2, j - 4) >> 6) << 4);
            m = (scale_byte(r.s0, r.s1, r.s2, j + 4) >> 4) | ((scale_byte(r.s0, r.s1, r.s2, j) >> 6) << 4);
        }
        const float dl = f16_bits(r.dd & 0xFFFF) * (float)sc, ml = f16_bits(r.dd >> 16) * (float)m;
        const uint32_t q[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
        const int shift = 4 * (j % 2);
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = dl * small_int((q[i / 4] >> (8 * (i % 4) + shift)) & 0xF, 0.0f) - ml;
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

// Q6_K: ql[128], qh[64], int8 scales[16], f16 d. k step j: half n = j / 4,
// quarter r = j % 4 takes ql[64n + 32 (r % 2) + l] (high nibbles for r >= 2)
// and bits 2r of qh[32n + l], l = 0..31, scale 8n + 2r + l / 16.
struct TcQ6_K {
    static constexpr int kElems = 256, kBytes = 210;
    struct Raw {
        uint32_t ql[4], qh[4], d;
        int sc;
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* blk = row + (size_t)(k0 / 256) * kBytes;
        const int j = (k0 % 256) / 32, n = j / 4, r = j % 4;
        Raw w;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w.ql[i] = ld_u32_from_u16(blk + 64 * n + 32 * (r % 2) + 16 * u + 4 * i);
            w.qh[i] = ld_u32_from_u16(blk + 128 + 32 * n + 16 * u + 4 * i);
        }
        w.d = ld_u16(blk + 208);
        w.sc = reinterpret_cast<const int8_t*>(blk)[192 + 8 * n + 2 * r + u];
        return w;
    }
    __device__ static void store(const Raw& w, __half* dst, int k0, int u) {
        const int r = ((k0 % 256) / 32) % 4;
        const float s = f16_bits(w.d) * (float)w.sc;
        const int lshift = 4 * (r / 2), hshift = 2 * r;
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int b = 8 * (i % 4);
            const uint32_t q = ((w.ql[i / 4] >> (b + lshift)) & 0xF) | (((w.qh[i / 4] >> (b + hshift)) & 3) << 4);
            v[i] = s * small_int(q, 32.0f);
        }
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

__device__ __forceinline__ float saturate_f16(float v) { return fminf(fmaxf(v, -65504.0f), 65504.0f); }

template <class F, int BN, int BK, int BM>
__global__ void __launch_bounds__(2 * BN)
    gemm_tc_kernel(MatmulParams p, const uint8_t* __restrict__ W, const float* __restrict__ x,
                   float* __restrict__ y, const float* __restrict__ bias) {
    constexpr int kThreads = 2 * BN, kWarpsN = BN / kWarpTile, kWarpM = BM / 2, kFragsM = kWarpM / 16;
    constexpr int kLds = BK + 8;                     // halves per shared row: fragment loads conflict-free
    constexpr int kUnits = BK / 32;                  // weight unit pairs of a row per step
    constexpr int kQuads = BK / 4;                   // activation float4s per token row per step
    constexpr int kXVec = BM * kQuads / kThreads;   // activation float4s per thread per step
    extern __shared__ __align__(128) uint8_t smem[];  // tile_shared_bytes<BN, BK, BM>()
    __half* xs = reinterpret_cast<__half*>(smem);  // [2][BM][kLds]
    __half* ws = xs + 2 * BM * kLds;               // [2][BN][kLds]

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN;
    const int n0 = blockIdx.x * BN, t0 = blockIdx.y * BM;
    const int M = (int)p.n_tokens, N = (int)p.N, K = (int)p.K;
    // This thread's weight units (16 elements each: u of every 32); rows past
    // N and tokens past M read the last one (computed, never written).
    const int wr = tid / 2, wu = tid % 2;
    const uint8_t* wrow = W + (size_t)min(n0 + wr, N - 1) * (K / F::kElems) * F::kBytes;
    const int quad = tid % kQuads;
    const float* xp[kXVec];
#pragma unroll
    for (int i = 0; i < kXVec; i++)
        xp[i] = x + (size_t)min(t0 + tid / kQuads + i * (kThreads / kQuads), M - 1) * p.x_stride + 4 * quad;

    typename F::Raw wraw[kUnits];
    float4 xr[kXVec];
    auto fetch = [&](int k0) {  // global -> registers
#pragma unroll
        for (int u = 0; u < kUnits; u++) wraw[u] = F::load(wrow, k0 + 32 * u, wu);
#pragma unroll
        for (int i = 0; i < kXVec; i++) xr[i] = *reinterpret_cast<const float4*>(xp[i] + k0);
    };
    auto stage = [&](int buf, int k0) {  // registers -> F16 shared tiles
#pragma unroll
        for (int u = 0; u < kUnits; u++) F::store(wraw[u], ws + (buf * BN + wr) * kLds + 32 * u, k0 + 32 * u, wu);
#pragma unroll
        for (int i = 0; i < kXVec; i++) {
            const float4 v = xr[i];
            *reinterpret_cast<uint2*>(xs + (buf * BM + tid / kQuads + i * (kThreads / kQuads)) * kLds + 4 * quad) =
                make_uint2(pack_half2(saturate_f16(v.x), saturate_f16(v.y)),
                           pack_half2(saturate_f16(v.z), saturate_f16(v.w)));
        }
    };
    fetch(0);
    stage(0, 0);
    __syncthreads();

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragsM][2];
#pragma unroll
    for (int i = 0; i < kFragsM; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

    const int nk = K / BK;
    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt & 1;
        const bool more = kt + 1 < nk;
        if (more) fetch((kt + 1) * BK);  // next step's loads in flight during this step's products
        const __half* xa = xs + (cur * BM + wm * kWarpM) * kLds;
        const __half* wb = ws + (cur * BN + wn * kWarpTile) * kLds;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[kFragsM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < kFragsM; i++) wmma::load_matrix_sync(a[i], xa + 16 * i * kLds + kk, kLds);
#pragma unroll
            for (int j = 0; j < 2; j++) wmma::load_matrix_sync(b[j], wb + 16 * j * kLds + kk, kLds);
#pragma unroll
            for (int i = 0; i < kFragsM; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        if (more) stage(cur ^ 1, (kt + 1) * BK);
        __syncthreads();
    }

    // Outputs through shared memory (the tiles are no longer read): a lane
    // writes one row n for the warp's 32 tokens, coalesced along n.
    float* cw = reinterpret_cast<float*>(smem) + warp * kWarpM * kCld;
#pragma unroll
    for (int i = 0; i < kFragsM; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(cw + 16 * i * kCld + 16 * j, acc[i][j], kCld, wmma::mem_row_major);
    __syncwarp();
    const int n = n0 + wn * kWarpTile + lane;
    if (n >= N) return;
    const float b = bias ? bias[n] : 0.0f;
    for (int tt = 0; tt < kWarpM; tt++) {
        const int t = t0 + wm * kWarpM + tt;
        if (t >= M) break;
        y[(size_t)t * p.y_stride + n] = cw[tt * kCld + lane] + b;
    }
}

// Dynamic shared memory of a <BN, BK, BM> kernel: two stages of tiles, or the output staging.
template <int BN, int BK, int BM>
constexpr int tile_shared_bytes() {
    const int tiles = 2 * (BM + BN) * (BK + 8) * 2, outputs = (2 * BN / 32) * (BM / 2) * kCld * 4;
    return tiles > outputs ? tiles : outputs;
}

int sm_count() {
    static int count = 0;
    if (count == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || count <= 0)
            count = 132;
    }
    return count;
}

// Environment switches for comparisons: AKUNU_CUDA_GEMM_BK=32 (k per step;
// default 64), AKUNU_CUDA_GEMM_BM=64 or 128 (tokens per block; default: 128
// when the grid still fills every SM twice).
int env_int(const char* name) {
    const char* e = std::getenv(name);
    return e ? std::atoi(e) : 0;
}

template <class F, int BN, int BK, int BM>
void launch_tiles(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    constexpr int shared = tile_shared_bytes<BN, BK, BM>();
    static const bool configured =
        cudaFuncSetAttribute(gemm_tc_kernel<F, BN, BK, BM>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared) ==
        cudaSuccess;
    (void)configured;
    const dim3 grid(blocks_for(p.N, BN), blocks_for(p.n_tokens, BM));
    gemm_tc_kernel<F, BN, BK, BM><<<grid, 2 * BN, shared, a.stream>>>(p, a.b<uint8_t>(0), x, y, bias);
}

template <class F>
void launch(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    static const int bk_env = env_int("AKUNU_CUDA_GEMM_BK"), bm_env = env_int("AKUNU_CUDA_GEMM_BM");
    const size_t fill = 2u * (size_t)sm_count();
    auto blocks = [&](unsigned bn, unsigned bm) { return (size_t)blocks_for(p.N, bn) * blocks_for(p.n_tokens, bm); };
    if (bk_env == 32 || p.K % 64 != 0) {  // the first version's shape
        if (blocks(128, 64) >= fill) launch_tiles<F, 128, 32, 64>(a, p, x, y, bias);
        else launch_tiles<F, 64, 32, 64>(a, p, x, y, bias);
        return;
    }
    // 128 x 128 tiles (twice the work per staged byte) where one wave of them
    // nearly fills the GPU (measured: 8B shapes gain, 1B's 2048-row matrices lose), else narrower ones
    const bool big = bm_env ? bm_env == 128 : blocks(128, 128) * 10 >= (size_t)sm_count() * 9;
    if (big) launch_tiles<F, 128, 64, 128>(a, p, x, y, bias);
    else if (blocks(128, 64) >= fill) launch_tiles<F, 128, 64, 64>(a, p, x, y, bias);
    else launch_tiles<F, 64, 64, 64>(a, p, x, y, bias);
}

}  // namespace

bool launch_gemm_tc(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    if (p.n_tokens == 0 || p.N == 0 || p.K == 0 || p.K % kMinBK != 0) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;  // float4 loads
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    const uintptr_t w = reinterpret_cast<uintptr_t>(a.buf[0]);
    switch (p.dtype) {
        case GGML_F16: if (w % 16) return false; launch<TcF16>(a, p, x, y, bias); return true;
        case GGML_BF16: if (w % 16) return false; launch<TcBF16>(a, p, x, y, bias); return true;
        case GGML_F32: if (w % 16) return false; launch<TcF32>(a, p, x, y, bias); return true;
        case GGML_Q8_0: if (w % 2) return false; launch<TcQ8_0>(a, p, x, y, bias); return true;
        case GGML_Q4_0: if (w % 2) return false; launch<TcQ4_0>(a, p, x, y, bias); return true;
        case GGML_Q4_K: if (p.K % 256 || w % 16) return false; launch<TcQ4_K>(a, p, x, y, bias); return true;
        case GGML_Q6_K: if (p.K % 256 || w % 2) return false; launch<TcQ6_K>(a, p, x, y, bias); return true;
        default: return false;
    }
}

}  // namespace akunu
