// What the standalone GEMV benches (tools/gemv_layout_bench.cu,
// tools/gemv_lane_bench.cu) share: a device pool of random weight bytes
// whose every 16-bit word reads as a finite, modest f16 (so scales anywhere
// in any layout are sane), and GB/s of weights of `reps` launches captured
// in one CUDA graph (no launch gaps), rotating over copies of the matrix in
// the pool so that each launch reads DRAM.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda_tool_check.h"

inline uint8_t* random_weight_pool(size_t bytes) {
    std::vector<uint8_t> h(bytes);
    uint32_t s = 12345;
    for (size_t i = 0; i < bytes; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = (uint8_t)(s >> 24);
        if (i % 2 == 1) h[i] &= 0x3B;
    }
    uint8_t* d;
    CHECK(cudaMalloc(&d, bytes));
    CHECK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
    return d;
}

// launch(weights, i) enqueues launch i on `stream`, reading `bytes` of weights.
template <class Launch>
double graph_gbps(cudaStream_t stream, const uint8_t* pool, size_t pool_bytes, size_t bytes, int reps, Launch launch) {
    const int copies = (int)(pool_bytes / bytes);
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < reps; i++) launch(pool + (size_t)(i % copies) * bytes);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, stream));  // warm-up
    CHECK(cudaEventRecord(e0, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaGetLastError());
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    return (double)bytes * reps / ms / 1e6;
}
