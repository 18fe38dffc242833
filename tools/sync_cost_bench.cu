// What one dependent step costs on the GPU, whatever the work: a decode
// step is a chain of ~10 small dependent kernels a layer, so the cost of a
// kernel boundary (with and without programmatic dependent launch, inside a
// CUDA graph) against a software grid barrier inside one persistent kernel
// decides whether a persistent decode kernel can pay. Each variant runs a
// chain of kSteps steps, timed by events over graph replays; every step
// reads a vector the step before wrote (the dependency real kernels have).
//   nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/sync_cost tools/sync_cost_bench.cu && /tmp/sync_cost
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "../backend/cuda/kernels/cuda_kernel.h"  // launch_maybe_pdl, pdl_wait
#include "cuda_graph_timer.h"
#include "cuda_tool_check.h"

constexpr int kSteps = 280;   // 28 layers x 10 kernels
constexpr int kThreads = 256;
constexpr int kDim = 1024;    // floats each step reads and (block 0) writes

using akunu::pdl_wait;
__device__ __forceinline__ void pdl_go() { akunu::pdl_launch_dependents(); }

// Every block reads the vector, block 0 writes the next one (ping-pong).
__device__ void dependent_step(const float* in, float* out, int step) {
    __shared__ float part[kThreads / 32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < kDim; i += blockDim.x) s += __ldcg(in + i);
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < kDim; i += blockDim.x) out[i] = part[i % (kThreads / 32)] * 1e-3f + step;
    __syncthreads();
}

__global__ void step_kernel(const float* in, float* out, int step, int pdl) {
    if (pdl) {
        pdl_wait();
        pdl_go();
    }
    dependent_step(in, out, step);
}

__global__ void empty_kernel(int pdl) {
    if (pdl) {
        pdl_wait();
        pdl_go();
    }
}

// A sense-reversing grid barrier: one atomic per block, block 0's thread
// spins on the generation word.
__device__ void grid_barrier(unsigned* count, volatile unsigned* gen, unsigned nblocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned g = *gen;
        __threadfence();
        if (atomicAdd(count, 1u) == nblocks - 1) {
            *count = 0;
            __threadfence();
            atomicAdd((unsigned*)gen, 1u);
        } else {
            while (*gen == g) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

__global__ void persistent_kernel(float* a, float* b, unsigned* count, unsigned* gen) {
    for (int s = 0; s < kSteps; s++) {
        dependent_step(s % 2 ? b : a, s % 2 ? a : b, s);
        grid_barrier(count, gen, gridDim.x);
    }
}

// Microseconds a step: the mean of 20 replays of a kSteps-step graph.
template <typename F>
float time_graph(cudaStream_t st, F&& enqueue) {
    return time_graph_replays(st, 3, 20, enqueue).mean * 1e3f / kSteps;
}

template <typename K, typename... Args>
void launch(K kernel, int blocks, cudaStream_t st, bool pdl, Args... args) {
    CHECK(akunu::launch_maybe_pdl(pdl, kernel, blocks, kThreads, 0, st, args...));
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *a, *b;
    unsigned* sync;
    CHECK(cudaMalloc(&a, kDim * 4));
    CHECK(cudaMalloc(&b, kDim * 4));
    CHECK(cudaMalloc(&sync, 8));
    CHECK(cudaMemset(a, 0, kDim * 4));
    CHECK(cudaMemset(sync, 0, 8));
    std::printf("us per dependent step, %d steps in one graph, %d threads a block, %d SMs\n", kSteps, kThreads, sms);
    for (int blocks : {sms, 4 * sms}) {
        for (int pdl : {0, 1}) {
            const float e = time_graph(st, [&] {
                for (int s = 0; s < kSteps; s++) launch(empty_kernel, blocks, st, pdl, pdl);
            });
            const float d = time_graph(st, [&] {
                for (int s = 0; s < kSteps; s++) launch(step_kernel, blocks, st, pdl, (const float*)(s % 2 ? b : a), s % 2 ? a : b, s, pdl);
            });
            std::printf("kernels  blocks %4d  pdl %d: empty %.2f  dependent read %.2f\n", blocks, pdl, e, d);
        }
    }
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_kernel, kThreads, 0));
    for (int blocks : {sms, sms * (per_sm < 4 ? per_sm : 4)}) {
        const float p = time_graph(st, [&] { persistent_kernel<<<blocks, kThreads, 0, st>>>(a, b, sync, sync + 1); });
        std::printf("persistent kernel, grid barrier, blocks %4d: %.2f\n", blocks, p);
    }
    CHECK(cudaGetLastError());
    return 0;
}
