// The kernel of P2PAllReduce (p2p_all_reduce.h) and its setup.
//
// Each of the kBlocks blocks owns a fixed chunk of the values and runs its
// own barrier: it pushes its chunk into every rank's receive buffer (slot =
// its rank, half = the epoch's parity), makes the writes visible system-wide,
// raises its flag in every rank's flag array, waits until every rank's flag
// for this block reached the epoch, then sums the ranks' slots in rank order.
// Every launch runs all kBlocks blocks (a block's epochs then alternate
// parity launch by launch), so a rank writing a half again (two launches
// later) knows that every rank finished reading it: passing the barrier in
// between needed every rank's next launch to have started, which begins only
// once its launch before had ended (stream order).
#include <cuda_runtime.h>

#include <string>

#include "../p2p_all_reduce.h"
#include "core/error.h"
#include "cuda_kernel.h"

namespace akunu {
namespace {

struct P2PArgs {
    float* x;
    float* acc;  // nullptr: the sum goes to x
    uint32_t n;
    int rank, ranks;
    float* recv[P2PAllReduce::kMaxRanks];       // every rank's receive buffer
    uint32_t* flags[P2PAllReduce::kMaxRanks];   // every rank's flag array
    uint32_t* epochs;                           // this rank's
    const volatile uint32_t* abort;
};

__device__ inline void store_release_sys(uint32_t* p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ inline uint32_t load_acquire_sys(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__global__ void __launch_bounds__(512) p2p_all_reduce_kernel(P2PArgs a) {
    const uint32_t b = blockIdx.x, tid = threadIdx.x;
    pdl_wait();  // (before anything: x, and the buffers the launch before this one read)
    const uint32_t chunk = ((a.n + gridDim.x - 1) / gridDim.x + 3) & ~3u;
    const uint32_t begin = min(a.n, b * chunk), end = min(a.n, begin + chunk);
    __shared__ uint32_t epoch_s;
    if (tid == 0) epoch_s = a.epochs[b] + 1;
    __syncthreads();
    const uint32_t epoch = epoch_s;
    const size_t half = (size_t)(epoch & 1) * a.ranks * P2PAllReduce::kMaxFloats;
    for (int p = 0; p < a.ranks; p++) {
        float* dst = a.recv[p] + half + (size_t)a.rank * P2PAllReduce::kMaxFloats;
        for (uint32_t i = begin + tid; i < end; i += blockDim.x) dst[i] = a.x[i];
    }
    __threadfence_system();  // this thread's pushes before the flags (every thread: no reliance on cumulativity)
    __syncthreads();
    if (tid < (uint32_t)a.ranks) {
        store_release_sys(a.flags[tid] + (size_t)b * a.ranks + a.rank, epoch);
        const uint32_t* mine = a.flags[a.rank] + (size_t)b * a.ranks + tid;
        for (uint32_t spins = 0; (int32_t)(load_acquire_sys(mine) - epoch) < 0; spins++)
            if ((spins & 1023) == 1023 && *a.abort) break;  // a rank failed: nothing will come
    }
    __syncthreads();
    const float* in = a.recv[a.rank] + half;
    for (uint32_t i = begin + tid; i < end; i += blockDim.x) {
        float s = __ldcv(in + i);
        for (int r = 1; r < a.ranks; r++) s += __ldcv(in + (size_t)r * P2PAllReduce::kMaxFloats + i);
        if (a.acc) a.acc[i] += s;
        else a.x[i] = s;
    }
    if (tid == 0) a.epochs[b] = epoch;
    pdl_launch_dependents();
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
               cudaMalloc(&r.flags, (size_t)kBlocks * n * sizeof(uint32_t)) == cudaSuccess &&
               cudaMalloc(&r.epochs, kBlocks * sizeof(uint32_t)) == cudaSuccess &&
               cudaMemset(r.flags, 0, (size_t)kBlocks * n * sizeof(uint32_t)) == cudaSuccess &&
               cudaMemset(r.epochs, 0, kBlocks * sizeof(uint32_t)) == cudaSuccess &&
               cudaDeviceSynchronize() == cudaSuccess;
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
        cudaFree(ranks_[i].flags);
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
        a.flags[r] = ranks_[r].flags;
    }
    a.epochs = ranks_[(size_t)rank].epochs;
    a.abort = abort_device_;
    check(launch_maybe_pdl(programmatic_, p2p_all_reduce_kernel, dim3(kBlocks), dim3(512), 0, stream, a),
          "p2p_all_reduce launch");
}

}  // namespace akunu
