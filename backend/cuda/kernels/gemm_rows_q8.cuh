// Integer tensor-core GEMM for the decode rows of batch tables over the
// K-quant weights real models are made of (Q4_K, and Q6_K in its regrouped
// Q6_K_X8 layout): y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]) for the few
// rows t a continuous batch generates a step, in engines of up to
// kBatchRowsMax sequences (matmul.cu, integer_decode_rows).
//
// The F16 row-side GEMM (gemm_rows.cuh) decodes every weight to F16 (a
// scale and a min applied per value) into shared memory before its
// products; on these formats that decode, not the memory, bounds it (Llama-
// 3.1-8B Q4_K_M, 1-16 rows: 0.4-0.6 TB/s on an H200). Here the weights stay
// integers: the activations are rounded to 8 bits per 32 values first
// (act_q8.h, as the decode GEMV takes them), each warp turns its 16 weight
// rows' quants into int8 lanes with masks and shifts, straight from its
// registers into the A operands of int8 products (m16n8k32, or m16n8k16
// where a Q6_K scale covers 16 values), and applies the block's scales once
// per 32 (16) values to the exact integer sums:
//   Q4_K:  acc += d sc_j * dx * sum(q * xq) - dmin m_j * (dx * sum(xq))
//   Q6_K:  acc += dx * (d sc_lo * sum_lo(q * xq) + d sc_hi * sum_hi(q * xq))
// A lane loads 8 consecutive bytes of a 32-value run; the product's k order
// within a run is permuted alike for weights and activations (an integer sum
// does not depend on it).
//
// A block is 4 warps over 64 weight rows (16 each) and NT x 8 rows; a warp
// keeps the next 256 values of its rows in flight in registers while it
// multiplies these. The k loop splits over blockIdx.z as gemm_rows.cuh's
// does (its split count, partials and ascending-order combine).
//
// Batch invariance: a row's output is its own column of the products, its
// integer sums exact, scaled and added in ascending k into an F32
// fragment, then over the splits in ascending order; the tile and the split
// come from N, K and the SM count alone, and a row's activations are
// rounded alone. So the number of rows never changes a row's result.
// Included once, by matmul.cu, after gemm_rows.cuh.
#pragma once
#include "act_q8.h"
#include "async_copy.cuh"
#include "gemm_rows.cuh"
#include "gemv_formats.cuh"

namespace akunu {
namespace gemm_rows {

// c += A B, 16 x 8 x 32 int8 (A: a0 = (g, k 4t..4t+3), a1 = (g+8, ..), a2 =
// (g, k 16+4t..), a3 = (g+8, k 16+4t..); B: b0 = (k 4t.., n g), b1 = (k
// 16+4t.., n g); C as mma.cuh's).
__device__ __forceinline__ void mma_s8_16832(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += A B, 16 x 8 x 16 int8 (a0 = (g, k 4t..4t+3), a1 = (g+8, ..); b0 = (k 4t.., n g)).
__device__ __forceinline__ void mma_s8_16816(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

// One 256-value block of the block's tokens' 8-bit activations, staged in
// shared memory: q [token][kQStride] (256 values, padded), ds [token][kEStride]
// (each 32-block's rounding (d, d * sum(q)), padded). Tokens past the pass
// are zeros. The padding keeps a warp's B loads (8 tokens x 4 lanes, 8
// bytes each) and its scale loads (4 tokens) on distinct banks.
constexpr int kQStride = 256 + 32;
constexpr int kEStride = 8 + 2;
struct StagedQ8 {
    const int8_t* q;
    const float2* ds;
    __device__ __forceinline__ uint2 q8(int tok, int off) const {
        return *reinterpret_cast<const uint2*>(q + tok * kQStride + off);
    }
    __device__ __forceinline__ uint32_t q4(int tok, int off) const {
        return *reinterpret_cast<const uint32_t*>(q + tok * kQStride + off);
    }
    __device__ __forceinline__ float2 e(int tok, int run) const { return ds[tok * kEStride + run]; }
};

// Q4_K: a 256-value block is d, dmin, 12 bytes of 6-bit scales and mins,
// then 4 runs of 32 bytes (run i: values 64i + l in the low nibbles, 64i +
// 32 + l in the high). A lane (t = lane % 4) loads bytes 8t..8t+7 of each run.
struct Q4KRows {
    static constexpr int kBlock = 256;
    __device__ static size_t row_bytes(int K) { return (size_t)(K / 256) * 144; }
    struct Regs {
        uint4 head;
        uint2 q[4];
    };
    __device__ static Regs load(const uint8_t* row, int blk, int tq) {
        const uint8_t* b = row + (size_t)blk * 144;
        Regs r;
        r.head = *reinterpret_cast<const uint4*>(b);
#pragma unroll
        for (int i = 0; i < 4; i++) r.q[i] = *reinterpret_cast<const uint2*>(b + 16 + 32 * i + 8 * tq);
        return r;
    }
    // Block blk of rows g (r0) and g + 8 (r1) into acc for NT token groups.
    template <int NT>
    __device__ static void apply(const Regs& r0, const Regs& r1, const StagedQ8& x, float (&acc)[NT][4]) {
        const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const gemv_formats::Q4KGroup s0 = gemv_formats::q4k_group(r0.head, i);
            const gemv_formats::Q4KGroup s1 = gemv_formats::q4k_group(r1.head, i);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int sh = 4 * h;
                const uint32_t a[4] = {(r0.q[i].x >> sh) & 0x0F0F0F0Fu, (r1.q[i].x >> sh) & 0x0F0F0F0Fu,
                                       (r0.q[i].y >> sh) & 0x0F0F0F0Fu, (r1.q[i].y >> sh) & 0x0F0F0F0Fu};
                const float d0 = h ? s0.d_hi : s0.d_lo, m0 = h ? s0.m_hi : s0.m_lo;
                const float d1 = h ? s1.d_hi : s1.d_lo, m1 = h ? s1.m_hi : s1.m_lo;
                const int k = 64 * i + 32 * h;  // the run's first value in the block
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const uint2 b = x.q8(8 * j + g, k + 8 * tq);
                    int c[4] = {0, 0, 0, 0};
                    mma_s8_16832(c, a, b.x, b.y);
                    const float2 ea = x.e(8 * j + 2 * tq, k / 32), eb = x.e(8 * j + 2 * tq + 1, k / 32);
                    acc[j][0] += d0 * ea.x * (float)c[0] - m0 * ea.y;
                    acc[j][1] += d0 * eb.x * (float)c[1] - m0 * eb.y;
                    acc[j][2] += d1 * ea.x * (float)c[2] - m1 * ea.y;
                    acc[j][3] += d1 * eb.x * (float)c[3] - m1 * eb.y;
                }
            }
        }
    }
};

// Q6_K_X8 (dtype_descriptor.h): groups of 8 Q6_K blocks, [ql x 8][qh x 8]
// [scales x 8][d x 8]. Block b's value 128n + 32r + l (half n, run r, l <
// 32): low 4 bits from ql[64n + 32(r % 2) + l] (low nibble for r < 2, high
// for r >= 2), high 2 bits from qh[32n + l] >> 2r, minus 32; scale
// sc[8n + 2r + l / 16]. A lane (t) holds l = 4t..4t+3 and 16+4t..16+4t+3
// of every run: a scale's 16 values are one m16n8k16 product.
struct Q6KX8Rows {
    static constexpr int kBlock = 256;
    __device__ static size_t row_bytes(int K) { return (size_t)(K / 2048) * 1680; }
    struct Regs {
        uint32_t ql[2][4];  // half n: ql[64n + {0, 16, 32, 48} + 4t]
        uint32_t qh[2][2];  // half n: qh[32n + {0, 16} + 4t]
        uint4 sc;
        uint32_t d;
    };
    __device__ static Regs load(const uint8_t* row, int blk, int tq) {
        const uint8_t* grp = row + (size_t)(blk / 8) * 1680;
        const int b = blk % 8;
        Regs r;
#pragma unroll
        for (int n = 0; n < 2; n++) {
#pragma unroll
            for (int i = 0; i < 4; i++) r.ql[n][i] = *reinterpret_cast<const uint32_t*>(grp + 128 * b + 64 * n + 16 * i + 4 * tq);
#pragma unroll
            for (int i = 0; i < 2; i++)
                r.qh[n][i] = *reinterpret_cast<const uint32_t*>(grp + 1024 + 64 * b + 32 * n + 16 * i + 4 * tq);
        }
        r.sc = *reinterpret_cast<const uint4*>(grp + 1536 + 16 * b);
        r.d = gemv_formats::ld_u16(grp + 1664 + 2 * b);
        return r;
    }
    // The lane's 4 values of half n, run r, at l = 16 * hi + 4t.., as int8 lanes.
    __device__ static uint32_t quants(const Regs& r, int n, int run, int hi) {
        const uint32_t lo4 = (r.ql[n][2 * (run % 2) + hi] >> (run < 2 ? 0 : 4)) & 0x0F0F0F0Fu;
        const uint32_t hi2 = ((r.qh[n][hi] >> (2 * run)) & 0x03030303u) << 4;
        return __vsubss4(lo4 | hi2, 0x20202020u);
    }
    // scale 8n + 2r + hi of the block, times d
    __device__ static float scale(const Regs& r, int n, int run, int hi) {
        const int i = 8 * n + 2 * run + hi;
        const uint32_t w = i < 4 ? r.sc.x : i < 8 ? r.sc.y : i < 12 ? r.sc.z : r.sc.w;
        return f16_to_f32((uint16_t)r.d) * (float)(int8_t)(w >> (8 * (i % 4)));
    }
    template <int NT>
    __device__ static void apply(const Regs& r0, const Regs& r1, const StagedQ8& x, float (&acc)[NT][4]) {
        const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
        for (int n = 0; n < 2; n++)
#pragma unroll
            for (int run = 0; run < 4; run++) {
                const uint32_t a0lo = quants(r0, n, run, 0), a1lo = quants(r1, n, run, 0);
                const uint32_t a0hi = quants(r0, n, run, 1), a1hi = quants(r1, n, run, 1);
                const float s0lo = scale(r0, n, run, 0), s0hi = scale(r0, n, run, 1);
                const float s1lo = scale(r1, n, run, 0), s1hi = scale(r1, n, run, 1);
                const int k = 128 * n + 32 * run;  // the run's first value in the block
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    int clo[4] = {0, 0, 0, 0}, chi[4] = {0, 0, 0, 0};
                    mma_s8_16816(clo, a0lo, a1lo, x.q4(8 * j + g, k + 4 * tq));
                    mma_s8_16816(chi, a0hi, a1hi, x.q4(8 * j + g, k + 16 + 4 * tq));
                    const float ea = x.e(8 * j + 2 * tq, k / 32).x, eb = x.e(8 * j + 2 * tq + 1, k / 32).x;
                    acc[j][0] += ea * (s0lo * (float)clo[0] + s0hi * (float)chi[0]);
                    acc[j][1] += eb * (s0lo * (float)clo[1] + s0hi * (float)chi[1]);
                    acc[j][2] += ea * (s1lo * (float)clo[2] + s1hi * (float)chi[2]);
                    acc[j][3] += eb * (s1lo * (float)clo[3] + s1hi * (float)chi[3]);
                }
            }
    }
};

// Shared memory of an NT block: two stages of its tokens' activations.
template <int NT>
constexpr int q8_shared_bytes() { return 2 * 8 * NT * (kQStride + kEStride * (int)sizeof(float2)); }

// Grid (token groups of 8 NT, 64-row tiles of the segments, splits). Each
// 256-value block's activations of the block's tokens are staged in shared
// memory by cp.async one block ahead (the warps share them; no lane reads
// another token's row through L1 / L2 for every product), and each warp's
// weights one block ahead in registers.
template <class F, int NT>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    gemm_rows_q8_kernel(MatmulParams p, Segments sg, ActQ8 xq, Split split) {
    constexpr int kTokens = 8 * NT;
    extern __shared__ __align__(16) uint8_t smem[];  // q8_shared_bytes<NT>()
    auto xs = reinterpret_cast<int8_t(*)[kTokens][kQStride]>(smem);                         // [2]
    auto es = reinterpret_cast<float2(*)[kTokens][kEStride]>(smem + 2 * kTokens * kQStride);  // [2]
    const int tid = threadIdx.x, tq = tid % 4;
    const WarpTile wt = warp_tile<NT>(p, sg, F::row_bytes((int)p.K));
    const int K = wt.K, M = wt.M, t0 = wt.t0;
    const uint8_t* w0 = wt.lo;
    const uint8_t* w1 = wt.hi;

    const int nb_all = K / F::kBlock;
    const int b0 = split.steps ? (int)blockIdx.z * split.steps : 0;
    const int b1 = split.steps ? min(nb_all, b0 + split.steps) : nb_all;

    // Block b's activations to stage s (a commit group of their own).
    auto stage = [&](int b, int s) {
        for (int c = tid; c < kTokens * 16; c += kThreads) {  // 16 bytes a copy, 16 a token
            const int t = c / 16, o = 16 * (c % 16);
            const bool valid = t0 + t < M;
            copy16_async(&xs[s][t][o], xq.q + (size_t)(valid ? t0 + t : 0) * K + (size_t)b * 256 + o, valid);
        }
        for (int c = tid; c < kTokens * 4; c += kThreads) {  // 8 float2 a token: 4 copies
            const int t = c / 4, o = 2 * (c % 4);
            const bool valid = t0 + t < M;
            copy16_async(&es[s][t][o], xq.ds + (size_t)(valid ? t0 + t : 0) * (K / 32) + (size_t)b * 8 + o, valid);
        }
        copy_commit();
    };

    // Launched as a programmatic dependent: the first block's weights
    // (immutable) load while the previous kernel (the rounding) finishes.
    typename F::Regs c0 = F::load(w0, b0, tq), c1 = F::load(w1, b0, tq);
    pdl_wait();
    pdl_launch_dependents();
    stage(b0, 0);
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    for (int b = b0; b < b1; b++) {
        const int s = (b - b0) & 1;
        typename F::Regs n0r = c0, n1r = c1;
        if (b + 1 < b1) {
            n0r = F::load(w0, b + 1, tq);
            n1r = F::load(w1, b + 1, tq);
        }
        __syncthreads();  // every warp is done with stage s ^ 1 (block b - 1) ...
        if (b + 1 < b1) stage(b + 1, s ^ 1);  // ... before block b + 1 refills it
        else copy_commit();                   // (an empty group keeps the wait count)
        copy_wait<1>();   // block b's copies landed (this thread's) ...
        __syncthreads();  // ... and everyone's
        F::template apply<NT>(c0, c1, StagedQ8{&xs[s][0][0], &es[s][0][0]}, acc);
        c0 = n0r;
        c1 = n1r;
    }
    copy_wait<0>();
    store_tile<NT>(acc, split, blockIdx.y, wt.n0, t0, wt.st.N, M, wt.st.y, wt.st.y_stride, wt.st.bias);
}

// The decode rows of sg's matrices in slices of kSliceRows: each slice's
// activations rounded to 8 bits (the device's activation scratch), then its
// rows in groups of 8, 16 or 32 by its count. False (nothing enqueued) where
// the scratch cannot hold a full slice's rounding, whatever this pass holds.
template <class F>
bool launch_rows_q8(const CudaArgs& a, MatmulParams p, Segments sg, const float* x) {
    ActQ8 xq;
    if (!act_q8_layout(a, kSliceRows, p.K, 0, &xq)) return false;
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    const unsigned tiles = gemm_tc::place_segments<kRows>(sg);
    Split split;
    const unsigned splits = plan_split(a, tiles, p.K / F::kBlock, &split);
    for_each_slice(p, sg, x, [&](const MatmulParams& ps, const Segments& slice, const float* xs) {
        if (!quantize_activations(a, xs, ps.x_stride, ps.n_tokens, ps.K, ActQ8Norm{}, &xq))
            throw Error("CUDA decode-row GEMM: the activations' rounding did not fit its scratch");
        auto go = [&](auto kernel, int nt, int shared) {
            const dim3 grid(blocks_for(ps.n_tokens, 8 * nt), tiles, splits);
            launch_pdl(kernel, grid, kThreads, shared, a, ps, slice, xq, split);
        };
        if (ps.n_tokens <= 8) go(gemm_rows_q8_kernel<F, 1>, 1, q8_shared_bytes<1>());
        else if (ps.n_tokens <= 16) go(gemm_rows_q8_kernel<F, 2>, 2, q8_shared_bytes<2>());
        else go(gemm_rows_q8_kernel<F, 4>, 4, q8_shared_bytes<4>());
    });
    return true;
}

}  // namespace gemm_rows

// The K-quant layout of sg's matrices that the row-side GEMMs of these
// formats take (here and gemm_rows_kq.cuh): Q4_K with K a multiple of 256,
// Q6_K_X8 with K a multiple of 2048, every matrix 16-byte aligned; kNone
// otherwise. From the matrices alone, never the rows.
enum class KQuantRows { kNone, kQ4K, kQ6KX8 };
inline KQuantRows kquant_rows(const MatmulParams& p, const gemm_tc::Segments& sg) {
    if (p.n_tokens == 0) return KQuantRows::kNone;
    uintptr_t w_bits = 0;
    for (uint32_t i = 0; i < sg.count; i++) {
        if (sg.N[i] == 0) return KQuantRows::kNone;
        w_bits |= reinterpret_cast<uintptr_t>(sg.W[i]);
    }
    if (w_bits % 16 != 0) return KQuantRows::kNone;
    if (p.dtype == GGML_Q4_K && p.K % 256 == 0) return KQuantRows::kQ4K;
    if (p.dtype == AKUNU_Q6_K_X8 && p.K % 2048 == 0) return KQuantRows::kQ6KX8;
    return KQuantRows::kNone;
}

// fn(F4{}) for Q4_K, fn(F6{}) for Q6_K_X8, as kquant_rows finds sg's layout;
// false for none.
template <class F4, class F6, class Fn>
inline bool with_kquant_rows(const MatmulParams& p, const gemm_tc::Segments& sg, Fn&& fn) {
    switch (kquant_rows(p, sg)) {
        case KQuantRows::kQ4K: return fn(F4{});
        case KQuantRows::kQ6KX8: return fn(F6{});
        default: return false;
    }
}

// Enqueues the decode rows of up to three matrices of one K and format (sg;
// p: K, n_tokens, dtype, x_stride) on the integer row-side GEMM; false when
// kquant_rows finds no layout of it.
inline bool launch_gemm_rows_q8(const CudaArgs& a, const MatmulParams& p, const float* x, const gemm_tc::Segments& sg) {
    return with_kquant_rows<gemm_rows::Q4KRows, gemm_rows::Q6KX8Rows>(
        p, sg, [&](auto f) { return gemm_rows::launch_rows_q8<decltype(f)>(a, p, sg, x); });
}

}  // namespace akunu
