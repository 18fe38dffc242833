// Times replays of one CUDA graph, for the standalone CUDA tools
// (tools/sync_cost_bench.cu, tools/decode_floor_bench.cu): the graph that
// enqueue() captures on `stream` is replayed `warmups` times, then `reps`
// times back to back with an event between replays (no host sync between
// them, so launch latency stays hidden as in real decode); each replay's
// milliseconds are the gap between its two events.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "cuda_tool_check.h"

struct GraphReplayMs {
    float best, mean;
};

template <class Enqueue>
GraphReplayMs time_graph_replays(cudaStream_t stream, int warmups, int reps, Enqueue&& enqueue) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<cudaEvent_t> marks(reps + 1);
    for (cudaEvent_t& e : marks) CHECK(cudaEventCreate(&e));
    for (int i = 0; i < warmups; i++) CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(marks[0], stream));
    for (int i = 0; i < reps; i++) {
        CHECK(cudaGraphLaunch(exec, stream));
        CHECK(cudaEventRecord(marks[i + 1], stream));
    }
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaGetLastError());
    GraphReplayMs t{1e30f, 0.0f};
    for (int i = 0; i < reps; i++) {
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
        if (ms < t.best) t.best = ms;
        t.mean += ms / reps;
    }
    for (cudaEvent_t& e : marks) CHECK(cudaEventDestroy(e));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    return t;
}
