// The kernel of P2PAllReduce (p2p_all_reduce.h) and its setup.
//
// Values carry their own arrival signal: every receive slot holds the
// sentinel -0.0f (kEmpty) until a rank's value lands there, and values are
// sent with -0.0f turned into +0.0f (which changes no sum but the sign of a
// zero one). So a rank pushes its values into every other rank's slot for it
// (half = the epoch's parity), then spins on its own slots until no value is
// empty, sums the ranks' values in rank order (the same bits on every rank)
// and empties the slots it read. No fence and no flag: the data's one-way
// trip over NVLink is the whole wait, where a flag after a system-wide fence
// costs a round trip more.
//
// Two halves suffice: a rank writes a half again two launches later, which
// starts only once every rank passed the launch in between, which needed
// this rank's values of that launch, sent after the launch before (that
// emptied the half) had ended (stream order). Each thread reads and empties
// the slots of its own values, whatever n was in the launch before.
#include <cuda_runtime.h>

#include <string>

#include "../p2p_all_reduce.h"
#include "core/error.h"
#include "cuda_kernel.h"

namespace akunu {
namespace {

constexpr uint32_t kEmpty = 0x80000000u;  // -0.0f: never sent

struct P2PArgs {
    float* x;
    float* acc;  // nullptr: the sum goes to x
    uint32_t n;
    int rank, ranks;
    float* recv[P2PAllReduce::kMaxRanks];  // every rank's receive buffer
    uint32_t* epochs;                      // this rank's
    const volatile uint32_t* abort;
};

__device__ __forceinline__ float sendable(float v) { return __fadd_rn(v, 0.0f); }  // -0 -> +0, else v

__device__ __forceinline__ void store_volatile(float* p, float v) {
    asm volatile("st.volatile.global.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}

// The value in slot p once a rank's value landed there, the slot emptied behind it.
__device__ __forceinline__ float take(float* p, const volatile uint32_t* abort) {
    uint32_t bits;
    for (uint32_t spins = 0;; spins++) {
        asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(bits) : "l"(p) : "memory");
        if (bits != kEmpty) break;
        if ((spins & 1023) == 1023 && *abort) return 0.0f;  // a rank failed: nothing will come
    }
    *reinterpret_cast<volatile uint32_t*>(p) = kEmpty;
    return __uint_as_float(bits);
}

__global__ void __launch_bounds__(512) p2p_all_reduce_kernel(P2PArgs a) {
    const uint32_t b = blockIdx.x, tid = threadIdx.x;
    pdl_wait();  // (before anything: x, and the slots the launch before this one emptied)
    const uint32_t chunk = (a.n + gridDim.x - 1) / gridDim.x;
    const uint32_t begin = min(a.n, b * chunk), end = min(a.n, begin + chunk);
    const uint32_t epoch = a.epochs[b] + 1;  // (each thread reads it before thread 0 writes it below)
    __syncthreads();
    const size_t half = (size_t)(epoch & 1) * a.ranks * P2PAllReduce::kMaxFloats;
    const size_t mine = (size_t)a.rank * P2PAllReduce::kMaxFloats;
    for (uint32_t i = begin + tid; i < end; i += blockDim.x) {
        const float v = sendable(a.x[i]);
        for (int p = 0; p < a.ranks; p++)
            if (p != a.rank) store_volatile(a.recv[p] + half + mine + i, v);
    }
    float* in = a.recv[a.rank] + half;
    for (uint32_t i = begin + tid; i < end; i += blockDim.x) {
        float s = 0.0f;
        for (int r = 0; r < a.ranks; r++) {
            const float v = r == a.rank ? sendable(a.x[i]) : take(in + (size_t)r * P2PAllReduce::kMaxFloats + i, a.abort);
            s = r == 0 ? v : s + v;
        }
        if (a.acc) a.acc[i] += s;
        else a.x[i] = s;
    }
    if (tid == 0) a.epochs[b] = epoch;
    pdl_launch_dependents();
}

__global__ void fill_empty_kernel(uint32_t* p, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = kEmpty;
}

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

P2PAllReduce::P2PAllReduce(const std::vector<int>& ordinals) : devices_(ordinals) {
    const int n = (int)ordinals.size();
    if (n < 2 || n > kMaxRanks) return;
    int current = -1;
    const bool had = cudaGetDevice(&current) == cudaSuccess;
    bool fine = true;
    for (int i = 0; i < n && fine; i++)
        for (int j = 0; j < n && fine; j++) {
            if (i == j) continue;
            int can = 0;
            fine = cudaDeviceCanAccessPeer(&can, ordinals[(size_t)i], ordinals[(size_t)j]) == cudaSuccess && can;
            if (!fine) break;
            cudaSetDevice(ordinals[(size_t)i]);
            const cudaError_t e = cudaDeviceEnablePeerAccess(ordinals[(size_t)j], 0);
            fine = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
        }
    cudaGetLastError();
    ranks_.resize((size_t)n);
    const size_t recv_bytes = (size_t)2 * n * kMaxFloats * sizeof(float);
    for (int i = 0; i < n && fine; i++) {
        Rank& r = ranks_[(size_t)i];
        cudaSetDevice(ordinals[(size_t)i]);
        fine = cudaMalloc(&r.recv, recv_bytes) == cudaSuccess &&
               cudaMalloc(&r.epochs, kBlocks * sizeof(uint32_t)) == cudaSuccess &&
               cudaMemset(r.epochs, 0, kBlocks * sizeof(uint32_t)) == cudaSuccess;
        if (fine) fill_empty_kernel<<<256, 256>>>(reinterpret_cast<uint32_t*>(r.recv), recv_bytes / sizeof(uint32_t));
        fine = fine && cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
    }
    void* host = nullptr;
    fine = fine && cudaHostAlloc(&host, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess;
    if (fine) {
        abort_host_ = static_cast<volatile uint32_t*>(host);
        *abort_host_ = 0;
        fine = cudaHostGetDevicePointer((void**)&abort_device_, host, 0) == cudaSuccess;
    }
    programmatic_ = fine;
    for (int i = 0; i < n && fine; i++) {  // programmatic launches need sm_90
        cudaDeviceProp prop;
        programmatic_ = programmatic_ && cudaGetDeviceProperties(&prop, ordinals[(size_t)i]) == cudaSuccess &&
                        prop.major >= 9;
    }
    cudaGetLastError();
    if (had) cudaSetDevice(current);
    ok_ = fine;
    if (!ok_) release();
}

P2PAllReduce::~P2PAllReduce() { release(); }

void P2PAllReduce::release() {
    for (size_t i = 0; i < ranks_.size(); i++) {
        cudaSetDevice(devices_[i]);
        cudaFree(ranks_[i].recv);
        cudaFree(ranks_[i].epochs);
    }
    ranks_.clear();
    if (abort_host_) cudaFreeHost((void*)abort_host_);
    abort_host_ = nullptr;
    cudaGetLastError();
    ok_ = false;
}

void P2PAllReduce::abort() {
    if (abort_host_) *abort_host_ = 1;
}

void P2PAllReduce::run(int rank, float* x, size_t n, cudaStream_t stream, float* acc) const {
    if (!serves(n)) throw Error("internal error: P2PAllReduce asked for a reduction it does not serve");
    P2PArgs a{};
    a.x = x;
    a.acc = acc;
    a.n = (uint32_t)n;
    a.rank = rank;
    a.ranks = (int)ranks_.size();
    for (size_t r = 0; r < ranks_.size(); r++) {
        a.recv[r] = ranks_[r].recv;
    }
    a.epochs = ranks_[(size_t)rank].epochs;
    a.abort = abort_device_;
    check(launch_maybe_pdl(programmatic_, p2p_all_reduce_kernel, dim3(kBlocks), dim3(512), 0, stream, a),
          "p2p_all_reduce launch");
}

}  // namespace akunu
