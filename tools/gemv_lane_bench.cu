// GB/s of weights of akunu's own decode lane formats (gemv_q8_formats.cuh:
// the very `row_dot` the GEMV kernels run) in a bare one-token GEMV, one warp
// a row, 8 warps a block at 5 blocks an SM (gemv_multi's lean kernel shape):
// how each format's lane work streams, with no activation rounding, no
// graph of a whole layer around it. Matrices rotate over > 4x the L2 so each
// launch reads DRAM; one CUDA graph of 100 launches a case (no launch gaps).
// Formats: the K-quants of Q4_K_M files (Q4_K, Q6_K in GGUF's layout, Q6_K
// regrouped as Q6_K_X8) and Q4_0_X8 for scale, at the Llama-3.1-8B and
// Llama-3.2-1B shapes where Q4_K_M puts Q6_K (output, ffn_down, attn_v).
//   nvcc -O3 -arch=sm_90 -std=c++17 -I src -I backend/cuda/kernels -o /tmp/lane tools/gemv_lane_bench.cu && /tmp/lane
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "gemv_bench_harness.h"
#include "gemv_q8_formats.cuh"

using namespace akunu;

template <class F>
__global__ void __launch_bounds__(256, 5) lane_kernel(const uint8_t* W, const int8_t* xq, const float2* ds, float* y,
                                                      int N, int K) {
    const int row = blockIdx.x * 8 + threadIdx.x / 32;
    if (row >= N) return;
    float acc = 0.0f;
    gemv_q8::row_dot<F, 1>(W + (size_t)row * (K / F::kElems) * F::kBytes, K, xq, ds, 1, &acc);
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
    if (threadIdx.x % 32 == 0) y[row] = acc;
}

struct Shape {
    const char* name;
    int N, K;
};

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    const size_t pool = 2ull << 30;
    const uint8_t* W = random_weight_pool(pool);
    int8_t* xq;
    float2* ds;
    float* y;
    CHECK(cudaMalloc(&xq, 1 << 16));
    CHECK(cudaMalloc(&ds, 1 << 16));
    CHECK(cudaMalloc(&y, 1 << 20));
    CHECK(cudaMemset(xq, 3, 1 << 16));
    CHECK(cudaMemset(ds, 0, 1 << 16));
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto run = [&](auto kernel, size_t bytes, const Shape& sh) {
        return graph_gbps(st, W, pool, bytes, 100, [&](const uint8_t* w) {
            kernel<<<(sh.N + 7) / 8, 256, 0, st>>>(w, xq, ds, y, sh.N, sh.K);
        });
    };
    const Shape shapes[] = {{"8B output", 128256, 4096}, {"8B down", 4096, 14336}, {"8B gate+up", 28672, 4096},
                            {"8B attn_v", 1024, 4096},   {"1B output", 128256, 2048}, {"1B down", 2048, 8192}};
    std::printf("%-12s %10s %10s %10s %10s   GB/s of weights\n", "shape", "Q4_K", "Q6_K", "Q6_K_X8", "Q4_0_X8");
    for (const Shape& sh : shapes) {
        const size_t rows = (size_t)sh.N, k = (size_t)sh.K;
        const double a = run(lane_kernel<gemv_q8::Q4_K>, rows * (k / 256) * 144, sh);
        const double b = run(lane_kernel<gemv_q8::Q6_K>, rows * (k / 256) * 210, sh);
        const double c = run(lane_kernel<gemv_q8::Q6_KX8>, rows * (k / 2048) * 1680, sh);
        const double d = run(lane_kernel<gemv_q8::Q4_0X8>, rows * (k / 256) * 144, sh);
        std::printf("%-12s %10.0f %10.0f %10.0f %10.0f\n", sh.name, a, b, c, d);
    }
    return 0;
}
