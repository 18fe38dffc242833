// Does a GPU-friendly weight layout pay for batch-1 quantized GEMVs? Times a
// one-token Q4_0 / Q8_0 GEMV with 8-bit activations (as gemv_multi's dp4a
// path) on the GGUF layout (18- / 34-byte blocks: 2-byte aligned, so a lane
// gathers its quants with 16-bit loads) against an 8-block interleave that
// keeps the same bytes per 256 weights ([8 f16 scales][8 x quants]: every
// lane's quants one or two aligned 16-byte loads), at the decode shapes of
// Llama-3.1-8B and Qwen3-0.6B. Matrices rotate over > 4x the L2 so every
// launch reads DRAM. Prints GB/s of weights and the read bandwidth of a plain
// streaming kernel for scale.
//   nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/gemv_layout tools/gemv_layout_bench.cu && /tmp/gemv_layout
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gemv_bench_harness.h"

constexpr uint32_t kNib = 0x0F0F0F0Fu;
__device__ __forceinline__ uint32_t ld16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t ld32_16(const uint8_t* p) { return ld16(p) | (ld16(p + 2) << 16); }
__device__ __forceinline__ int dp4(uint32_t a, int b, int c) { return __dp4a((int)a, b, c); }
__device__ __forceinline__ float h2f(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
    return v;
}

// ---- GGUF layout, as gemv_q8_formats.cuh: 2 lanes a block ----
template <bool Q8>
__global__ void __launch_bounds__(256) gguf_kernel(const uint8_t* W, const int8_t* xq, const float2* ds, float* y,
                                                   int N, int K) {
    const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    constexpr int kBytes = Q8 ? 34 : 18;
    const int nb = K / 32, sub = lane % 2;
    const uint8_t* r = W + (size_t)row * nb * kBytes;
    float acc = 0.f;
#pragma unroll 4
    for (int b = lane / 2; b < nb; b += 16) {
        const uint8_t* blk = r + (size_t)b * kBytes;
        const float d = h2f(ld16(blk));
        const float2 e = ds[b];
        if (Q8) {
            const int4 a = *reinterpret_cast<const int4*>(xq + 32 * b + 16 * sub);
            int s = dp4(ld32_16(blk + 2 + 16 * sub), a.x, 0);
            s = dp4(ld32_16(blk + 6 + 16 * sub), a.y, s);
            s = dp4(ld32_16(blk + 10 + 16 * sub), a.z, s);
            s = dp4(ld32_16(blk + 14 + 16 * sub), a.w, s);
            acc += d * e.x * (float)s;
        } else {
            const uint32_t q0 = ld32_16(blk + 2 + 8 * sub), q1 = ld32_16(blk + 6 + 8 * sub);
            const int2 a = *reinterpret_cast<const int2*>(xq + 32 * b + 8 * sub);
            const int2 c = *reinterpret_cast<const int2*>(xq + 32 * b + 16 + 8 * sub);
            const int s = dp4(q0 & kNib, a.x, dp4(q1 & kNib, a.y, dp4((q0 >> 4) & kNib, c.x, dp4((q1 >> 4) & kNib, c.y, 0))));
            acc += d * (e.x * (float)s - 4.0f * e.y);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

// ---- 8-block interleave: per 256 weights [8 x f16 d][8 x quants] ----
// A lane a block (Q4_0: one 16-byte load; Q8_0: two). Rows per warp R
// (consecutive), so a warp has R independent streams in flight.
template <bool Q8, int R, int U>
__global__ void __launch_bounds__(256) x8_kernel(const uint8_t* W, const int8_t* xq, const float2* ds, float* y, int N,
                                                 int K) {
    const int row0 = (blockIdx.x * 8 + threadIdx.x / 32) * R, lane = threadIdx.x % 32;
    if (row0 >= N) return;
    constexpr int kSuper = Q8 ? 272 : 144;
    const int nb = K / 32;
    const size_t row_bytes = (size_t)(K / 256) * kSuper;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.f;
#pragma unroll U
    for (int b = lane; b < nb; b += 32) {
        const int s = b / 8, j = b % 8;
        const int4 a0 = *reinterpret_cast<const int4*>(xq + 32 * b), a1 = *reinterpret_cast<const int4*>(xq + 32 * b + 16);
        const float2 e = ds[b];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uint8_t* sb = W + (size_t)(row0 + r) * row_bytes + (size_t)s * kSuper;
            const float d = h2f(ld16(sb + 2 * j));
            if (Q8) {
                const uint4 q = *reinterpret_cast<const uint4*>(sb + 16 + 32 * j);
                const uint4 p = *reinterpret_cast<const uint4*>(sb + 32 + 32 * j);
                int v = dp4(q.x, a0.x, dp4(q.y, a0.y, dp4(q.z, a0.z, dp4(q.w, a0.w, 0))));
                v = dp4(p.x, a1.x, dp4(p.y, a1.y, dp4(p.z, a1.z, dp4(p.w, a1.w, v))));
                acc[r] += d * e.x * (float)v;
            } else {
                const uint4 q = *reinterpret_cast<const uint4*>(sb + 16 + 16 * j);
                int v = dp4(q.x & kNib, a0.x, dp4(q.y & kNib, a0.y, dp4(q.z & kNib, a0.z, dp4(q.w & kNib, a0.w, 0))));
                v = dp4((q.x >> 4) & kNib, a1.x, dp4((q.y >> 4) & kNib, a1.y,
                         dp4((q.z >> 4) & kNib, a1.z, dp4((q.w >> 4) & kNib, a1.w, v))));
                acc[r] += d * (e.x * (float)v - 8.0f * e.y);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const float v = warp_sum(acc[r]);
        if (lane == 0 && row0 + r < N) y[row0 + r] = v;
    }
}

// plain streaming read, for scale
__global__ void read_kernel(const uint4* p, size_t n, float* out) {
    uint32_t s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = p[i];
        s ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (s == 0x12345678u) out[0] = 1.f;
}

struct Shape {
    const char* name;
    int N, K;
};

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    const size_t pool = 1ull << 30;  // 1 GiB of weights rotated over (L2 50 MB)
    uint8_t* W = random_weight_pool(pool);
    int8_t* xq;
    float2* ds;
    float* y;
    CHECK(cudaMalloc(&xq, 1 << 16));
    CHECK(cudaMalloc(&ds, 1 << 16));
    CHECK(cudaMalloc(&y, 1 << 20));
    CHECK(cudaMemset(xq, 3, 1 << 16));
    CHECK(cudaMemset(ds, 0, 1 << 16));
    float* sink;
    CHECK(cudaMalloc(&sink, 16));
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    {
        read_kernel<<<prop.multiProcessorCount * 8, 256>>>((const uint4*)W, pool / 16, sink);
        CHECK(cudaEventRecord(e0));
        for (int i = 0; i < 10; i++) read_kernel<<<prop.multiProcessorCount * 8, 256>>>((const uint4*)W, pool / 16, sink);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        std::printf("streaming read: %.0f GB/s\n", 10.0 * pool / ms / 1e6);
    }
    const Shape shapes[] = {{"8B qkv", 6144, 4096},     {"8B o", 4096, 4096},     {"8B gate+up", 28672, 4096},
                            {"8B down", 4096, 14336},   {"0.6B qkv", 4096, 1024}, {"0.6B o", 1024, 2048},
                            {"0.6B gate+up", 6144, 1024}, {"0.6B down", 1024, 3072}};
    std::printf("%-14s %-6s %10s %10s %10s %10s %10s\n", "shape", "fmt", "gguf", "x8 R1", "x8 R2", "x8 R1 U8",
                "x8 R4");
    for (const Shape& sh : shapes) {
        for (int q8 = 0; q8 < 2; q8++) {
            const size_t bytes = (size_t)sh.N * (sh.K / 32) * (q8 ? 34 : 18);
            auto run = [&](auto launch, int rows_per_warp) {
                const int blocks = (sh.N / rows_per_warp + 7) / 8;
                return graph_gbps(st, W, pool, bytes, 200, [&](const uint8_t* w) { launch(w, blocks); });
            };
            double g, a, b, c, d;
            if (q8) {
                g = run([&](const uint8_t* w, int bl) { gguf_kernel<true><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 1);
                a = run([&](const uint8_t* w, int bl) { x8_kernel<true, 1, 4><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 1);
                b = run([&](const uint8_t* w, int bl) { x8_kernel<true, 2, 4><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 2);
                c = run([&](const uint8_t* w, int bl) { x8_kernel<true, 1, 8><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 1);
                d = run([&](const uint8_t* w, int bl) { x8_kernel<true, 4, 2><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 4);
            } else {
                g = run([&](const uint8_t* w, int bl) { gguf_kernel<false><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 1);
                a = run([&](const uint8_t* w, int bl) { x8_kernel<false, 1, 4><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 1);
                b = run([&](const uint8_t* w, int bl) { x8_kernel<false, 2, 4><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 2);
                c = run([&](const uint8_t* w, int bl) { x8_kernel<false, 1, 8><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 1);
                d = run([&](const uint8_t* w, int bl) { x8_kernel<false, 4, 2><<<bl, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K); }, 4);
            }
            std::printf("%-14s %-6s %10.0f %10.0f %10.0f %10.0f %10.0f  GB/s\n", sh.name, q8 ? "Q8_0" : "Q4_0", g, a, b,
                        c, d);
        }
    }
    return 0;
}
