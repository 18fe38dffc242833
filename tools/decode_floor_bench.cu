// How fast could a kernel-per-projection F16 decode step be on this GPU?
// Times one token's weight reads alone: every layer's projections (QKV, O,
// gate + up, down) and the output head as pure streaming reads of the same
// byte counts, chained as akunu chains its decode kernels (one CUDA graph,
// each kernel a programmatic dependent of the one before that waits for it),
// with no arithmetic, no attention, no norms. The result bounds any decode
// that reads each projection in a kernel of its own: the real step adds its
// dot products, attention and norms on top. Each matrix is read either
// grid-stride (the order that streams fastest) or a warp a row (akunu's
// GEMVs' order); with or without an empty kernel a layer where the attention
// goes (its boundary alone). Also prints the best plain
// streaming read of a large buffer (the GPU's read ceiling), sweeping block
// size, blocks an SM and loads in flight. FLOOR_ALL=1 prints every
// configuration's time, not just the best.
//   nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/decode_floor tools/decode_floor_bench.cu && /tmp/decode_floor
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../backend/cuda/kernels/cuda_kernel.h"  // launch_maybe_pdl, pdl_wait
#include "cuda_graph_timer.h"
#include "cuda_tool_check.h"

// 16 bytes, not kept in L1 (as akunu's float rows: ld_stream_u4).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Reads n16 16-byte words at p, grid-stride, kInFlight loads issued before
// any is used. prefetch: each thread first asks L2 for its first word's line
// before the programmatic wait (as the decode GEMVs ask for their rows'
// first bytes). The xor keeps the loads; the sink is written never in practice.
template <int kInFlight>
__global__ void stream_kernel(const uint4* p, size_t n16, unsigned* sink, int prefetch) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (prefetch && i < n16) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + i));
    akunu::pdl_wait();
    akunu::pdl_launch_dependents();
    uint32_t s = 0;
    for (; i + (kInFlight - 1) * stride < n16; i += kInFlight * stride) {
        uint4 v[kInFlight];
#pragma unroll
        for (int k = 0; k < kInFlight; k++) v[k] = ld_stream(p + i + k * stride);
#pragma unroll
        for (int k = 0; k < kInFlight; k++) s ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = ld_stream(p + i);
        s ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (s == 0x9E3779B9u) *sink = s;
}

// Reads `rows` rows of row16 16-byte words at p, a warp a row (as akunu's
// one-token GEMVs map rows), four loads in flight a lane.
__global__ void row_kernel(const uint4* p, int rows, int row16, unsigned* sink, int prefetch) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint4* r = p + (size_t)row * row16;
    if (prefetch && row < rows) asm volatile("prefetch.global.L2 [%0];" ::"l"(r + lane * 8));
    akunu::pdl_wait();
    akunu::pdl_launch_dependents();
    if (row >= rows) return;
    uint32_t s = 0;
    int i = lane;
    for (; i + 96 < row16; i += 128) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) v[k] = ld_stream(r + i + 32 * k);
#pragma unroll
        for (int k = 0; k < 4; k++) s ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    }
    for (; i < row16; i += 32) {
        const uint4 v = ld_stream(r + i);
        s ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (s == 0x9E3779B9u) *sink = s;
}

// A kernel that reads nothing: the place of a layer's attention when asked
// (its boundary alone).
__global__ void empty_kernel() {
    akunu::pdl_wait();
    akunu::pdl_launch_dependents();
}

using StreamFn = void (*)(const uint4*, size_t, unsigned*, int);
StreamFn stream_fn(int in_flight) {
    switch (in_flight) {
        case 1: return stream_kernel<1>;
        case 2: return stream_kernel<2>;
        case 4: return stream_kernel<4>;
        default: return stream_kernel<8>;
    }
}

struct Config {
    int threads, blocks_per_sm, in_flight, pdl, prefetch, attention;
};

// kernel<<<grid, threads, smem, st>>>(args...), a programmatic dependent
// of the one before when `pdl` (akunu's own launcher).
template <typename... Params, typename... Args>
void launch_smem(bool pdl, void (*k)(Params...), int grid, int threads, size_t smem, cudaStream_t st,
                 Args... args) {
    CHECK(akunu::launch_maybe_pdl(pdl, k, grid, threads, smem, st, args...));
}

template <typename... Params, typename... Args>
void launch(bool pdl, void (*k)(Params...), int grid, int threads, cudaStream_t st, Args... args) {
    launch_smem(pdl, k, grid, threads, 0, st, args...);
}

// Milliseconds of one replay of the graph that `enqueue` captures (best of reps).
template <class Enqueue>
float graph_ms(cudaStream_t st, int reps, Enqueue enqueue) {
    return time_graph_replays(st, 1, reps, enqueue).best;
}

// An F16 matrix of a decode step: rows x K.
struct Matrix {
    size_t rows, K;
    size_t bytes() const { return rows * K * 2; }
};

// One token's F16 weight reads, in the order a decode step makes them
// (gate + up as one matrix of both: akunu reads them in one kernel).
struct Model {
    const char* name;
    int layers;
    Matrix qkv, o, gate_up, down, head;
    size_t token_bytes() const {
        return layers * (qkv.bytes() + o.bytes() + gate_up.bytes() + down.bytes()) + head.bytes();
    }
};

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    std::printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
    // Real shapes (tied heads read the embedding: same bytes).
    const Model models[] = {
        {"qwen3-0.6b", 28, {2048 + 1024 + 1024, 1024}, {1024, 2048}, {2 * 3072, 1024}, {1024, 3072}, {151936, 1024}},
        {"llama-3.2-1b", 16, {2048 + 512 + 512, 2048}, {2048, 2048}, {2 * 8192, 2048}, {2048, 8192}, {128256, 2048}},
        {"llama-3.1-8b", 32, {4096 + 1024 + 1024, 4096}, {4096, 4096}, {2 * 14336, 4096}, {4096, 14336},
         {128256, 4096}},
    };
    size_t pool = 8ull << 30;
    for (const Model& m : models) pool = std::max(pool, m.token_bytes() + (1 << 20));
    uint8_t* W;
    CHECK(cudaMalloc(&W, pool));
    CHECK(cudaMemset(W, 0x3C, pool));
    unsigned* sink;
    CHECK(cudaMalloc(&sink, 16));
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    // The read ceiling: 8 reads of 1 GiB, each elsewhere in the pool.
    const size_t chunk = 1ull << 30;
    double ceiling = 0;
    Config best_cfg{};
    for (int threads : {256, 512, 1024})
        for (int bps : {1, 2, 4, 8})
            for (int inf : {1, 2, 4, 8}) {
                if (threads * bps > prop.maxThreadsPerMultiProcessor) continue;
                const float ms = graph_ms(st, 3, [&] {
                    for (int r = 0; r < 8; r++)
                        launch(false, stream_fn(inf), sms * bps, threads, st, (const uint4*)(W + (size_t)r * chunk),
                               chunk / 16, sink, 0);
                });
                const double gbps = 8.0 * chunk / ms / 1e6;
                if (gbps > ceiling) {
                    ceiling = gbps;
                    best_cfg = {threads, bps, inf, 0, 0, 0};
                }
            }
    std::printf("read ceiling: %.0f GB/s (%d threads, %d blocks an SM, %d loads in flight)\n", ceiling,
                best_cfg.threads, best_cfg.blocks_per_sm, best_cfg.in_flight);

    // One token's chain, per model, over launch configurations; the best.
    // Pattern "stream": each matrix read grid-stride (the read ceiling's
    // order). Pattern "rows": a warp a row, 8-warp blocks, at most `bps`
    // blocks an SM (dynamic shared memory caps them), as akunu's GEMVs.
    std::printf("%-14s %9s %7s %10s %9s %8s  %s\n", "model", "GB/token", "reads", "attention", "us/token", "tok/s",
                "GB/s (config: threads, blocks an SM, in flight, pdl, prefetch)");
    const size_t smem_per_sm = prop.sharedMemPerMultiprocessor;
    CHECK(cudaFuncSetAttribute(row_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin));
    for (const Model& m : models)
        for (int rows : {0, 1})
            for (int attention : {0, 1}) {
                float best_ms = 1e30f;
                Config best{};
                for (int threads : {256, 512})
                    for (int bps : {2, 4, 6, 8})
                        for (int inf : {1, 2, 4})
                            for (int pdl : {0, 1})
                                for (int prefetch : {0, 1}) {
                                    if (threads * bps > prop.maxThreadsPerMultiProcessor || (prefetch && !pdl)) continue;
                                    if (rows && (threads != 256 || inf != 4)) continue;
                                    if (!rows && bps == 6) continue;
                                    const size_t smem = rows ? smem_per_sm / bps - 1024 - 1024 : 0;
                                    const float ms = graph_ms(st, 5, [&] {
                                        size_t at = 0;
                                        auto read = [&](const Matrix& x) {
                                            if (rows)
                                                launch_smem(pdl != 0, row_kernel, (int)((x.rows + 7) / 8), 256, smem,
                                                            st, (const uint4*)(W + at), (int)x.rows, (int)(x.K * 2 / 16),
                                                            sink, prefetch);
                                            else
                                                launch(pdl != 0, stream_fn(inf), sms * bps, threads, st,
                                                       (const uint4*)(W + at), x.bytes() / 16, sink, prefetch);
                                            at += x.bytes();
                                        };
                                        for (int l = 0; l < m.layers; l++) {
                                            read(m.qkv);
                                            if (attention) launch(pdl != 0, empty_kernel, sms, 128, st);
                                            read(m.o);
                                            read(m.gate_up);
                                            read(m.down);
                                        }
                                        read(m.head);
                                    });
                                    if (std::getenv("FLOOR_ALL"))
                                        std::printf("  %s %s %s: %d threads, %d blocks an SM, %d in flight, pdl %d, "
                                                    "prefetch %d: %.1f us\n",
                                                    m.name, rows ? "rows" : "stream", attention ? "empty" : "none",
                                                    threads, bps, inf, pdl, prefetch, ms * 1e3);
                                    if (ms < best_ms) {
                                        best_ms = ms;
                                        best = {threads, bps, inf, pdl, prefetch, attention};
                                    }
                                }
                const double gb = m.token_bytes() / 1e9;
                std::printf("%-14s %9.3f %7s %10s %9.1f %8.1f  %.0f (%d, %d, %d, %d, %d)\n", m.name, gb,
                            rows ? "rows" : "stream", attention ? "empty" : "none", best_ms * 1e3, 1e3 / best_ms,
                            gb / best_ms * 1e3, best.threads, best.blocks_per_sm, best.in_flight, best.pdl,
                            best.prefetch);
            }
    return 0;
}
