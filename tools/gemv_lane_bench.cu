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
#include <vector>

#include "cuda_tool_check.h"
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
    uint8_t* W;
    CHECK(cudaMalloc(&W, pool));
    {  // random bytes; every 16-bit word a finite, modest f16 (scales anywhere in any layout)
        std::vector<uint8_t> h(pool);
        uint32_t s = 12345;
        for (size_t i = 0; i < pool; i++) {
            s = s * 1664525u + 1013904223u;
            h[i] = (uint8_t)(s >> 24);
            if (i % 2 == 1) h[i] &= 0x3B;
        }
        CHECK(cudaMemcpy(W, h.data(), pool, cudaMemcpyHostToDevice));
    }
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
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    auto run = [&](auto kernel, size_t bytes, const Shape& sh) {
        const int copies = (int)(pool / bytes), reps = 100, blocks = (sh.N + 7) / 8;
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < reps; i++) kernel<<<blocks, 256, 0, st>>>(W + (size_t)(i % copies) * bytes, xq, ds, y, sh.N, sh.K);
        CHECK(cudaStreamEndCapture(st, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CHECK(cudaGraphLaunch(exec, st));
        CHECK(cudaEventRecord(e0, st));
        CHECK(cudaGraphLaunch(exec, st));
        CHECK(cudaEventRecord(e1, st));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaGetLastError());
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        return (double)bytes * reps / ms / 1e6;
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
