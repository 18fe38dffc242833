#include "nccl_collective.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "core/error.h"
#include "nccl_library.h"
#include "p2p_all_reduce.h"

namespace akunu {

// The communicators of one ncclCommInitAll, shared by its ranks' collectives.
struct NcclGroup {
    const NcclLibrary* nccl = nullptr;
    std::vector<NcclLibrary::Comm> comms;
    std::vector<int> devices;  // rank r's CUDA ordinal
    bool initialized = false;
    // One a rank: held by that rank's thread while it is inside NCCL (an
    // enqueue), and by the aborting thread around ncclCommAbort, so a
    // communicator is never used by two threads at once (NCCL forbids it).
    std::unique_ptr<std::mutex[]> locks;
    std::atomic<bool> aborted{false};
    // Aborts the communicators once abort() was called (see there).
    std::thread reclaimer;
    // The small reductions (decode steps) over peer-to-peer links, where the
    // GPUs have them (nullptr: NCCL serves all; AKUNU_P2P_ALL_REDUCE=0 turns it off).
    std::unique_ptr<P2PAllReduce> p2p;

    ~NcclGroup();
    void abort();
    void abort_all();
};

namespace {

[[noreturn]] void fail(const NcclLibrary& nccl, int result, const char* what) {
    std::string msg = std::string("NCCL error in ") + what + ": " + nccl.get_error_string(result);
    if (nccl.get_last_error) {
        const char* detail = nccl.get_last_error(nullptr);
        if (detail && *detail) msg += std::string(" (") + detail + ")";
    }
    throw Error(msg);
}

[[noreturn]] void aborted_error() {
    throw Error("a tensor-parallel rank failed; this model cannot run further");
}

// Holds rank r's lock while the rank's thread is inside NCCL; throws once
// the group is aborted. The lock is only ever contended by the aborting
// thread, which may hold it for long (the last ncclCommAbort waits until the
// graphs holding the group's operations are destroyed): the rank never
// blocks on it, it sees the abort and throws instead.
class Enqueue {
public:
    Enqueue(NcclGroup& g, int rank) : lock_(g.locks[(size_t)rank], std::defer_lock) {
        for (;;) {
            if (g.aborted.load(std::memory_order_acquire)) aborted_error();
            if (lock_.try_lock()) break;
            std::this_thread::yield();
        }
        if (g.aborted.load(std::memory_order_acquire)) aborted_error();  // (aborted between the check and the lock)
    }

private:
    std::unique_lock<std::mutex> lock_;
};

}  // namespace

void NcclGroup::abort() {
    if (p2p) p2p->abort();  // (kernels waiting for a rank that failed return)
    bool expected = false;
    if (!initialized || !aborted.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
    // ncclCommAbort first sets the communicator's abort flag (its kernels in
    // flight quit, a rank blocked in a stream synchronization returns), then
    // the last one of the process frees every communicator, which waits until
    // every CUDA graph holding their operations is destroyed (NCCL 2.26+):
    // those graphs belong to the rank devices, destroyed later, so this runs
    // on a thread of its own and the caller returns at once.
    try {
        reclaimer = std::thread([this] { abort_all(); });
    } catch (const std::system_error&) {
        abort_all();
    }
}

void NcclGroup::abort_all() {
    const size_t n = comms.size();
    std::vector<char> done(n, 0);
    // First the ranks not inside NCCL now, then the others once they leave it
    // (an enqueue returns promptly: connections are made at initialization).
    for (int pass = 0; pass < 2; pass++)
        for (size_t r = 0; r < n; r++) {
            if (done[r]) continue;
            std::unique_lock<std::mutex> lock(locks[r], std::defer_lock);
            if (pass == 0 && !lock.try_lock()) continue;
            if (pass == 1) lock.lock();
            nccl->comm_abort(comms[r]);  // (its result: nothing more to do either way)
            done[r] = 1;
        }
}

NcclGroup::~NcclGroup() {
    if (reclaimer.joinable()) {
        reclaimer.join();
        return;
    }
    if (!initialized || aborted.load()) return;
    // ncclCommDestroy makes each communicator's GPU current on this thread:
    // the caller's current GPU is put back afterwards.
    int dev = -1;
    const bool had_device = cudaGetDevice(&dev) == cudaSuccess;
    for (NcclLibrary::Comm c : comms) nccl->comm_destroy(c);  // the last frees them all
    if (had_device) cudaSetDevice(dev);
}

NcclCollective::NcclCollective(std::shared_ptr<NcclGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

NcclCollective::~NcclCollective() = default;

int NcclCollective::size() const { return (int)group_->comms.size(); }

int NcclCollective::device() const { return group_->devices[(size_t)rank_]; }

bool NcclCollective::aborted() const { return group_->aborted.load(std::memory_order_acquire); }

void NcclCollective::abort() { group_->abort(); }

void NcclCollective::all_reduce_sum(float* x, size_t n, void* stream) {
    if (n == 0) return;  // (the same on every rank: the commands' parameters are)
    if (group_->p2p && group_->p2p->serves(n)) {  // (n is the same on every rank: so is the choice)
        if (aborted()) aborted_error();
        group_->p2p->run(rank_, x, n, static_cast<cudaStream_t>(stream));
        return;
    }
    Enqueue guard(*group_, rank_);
    const NcclLibrary& nccl = *group_->nccl;
    const int r = nccl.all_reduce(x, x, n, NcclLibrary::kFloat32, NcclLibrary::kSum, group_->comms[(size_t)rank_],
                                  static_cast<cudaStream_t>(stream));
    if (r != NcclLibrary::kSuccess) fail(nccl, r, "ncclAllReduce");
}

bool NcclCollective::all_reduce_add(float* x, float* acc, size_t n, void* stream) {
    if (n == 0 || !group_->p2p || !group_->p2p->serves(n)) return false;  // (the same choice on every rank)
    if (aborted()) aborted_error();
    group_->p2p->run(rank_, x, n, static_cast<cudaStream_t>(stream), acc);
    return true;
}

void NcclCollective::all_gather(const float* src, float* dst, size_t n, void* stream) {
    if (n == 0) return;
    Enqueue guard(*group_, rank_);
    const NcclLibrary& nccl = *group_->nccl;
    const int r = nccl.all_gather(src, dst, n, NcclLibrary::kFloat32, group_->comms[(size_t)rank_],
                                  static_cast<cudaStream_t>(stream));
    if (r != NcclLibrary::kSuccess) fail(nccl, r, "ncclAllGather");
}

std::vector<std::unique_ptr<Collective>> make_nccl_collectives(const std::vector<int>& ordinals) {
    if (ordinals.empty()) throw Error("tensor parallelism needs at least one GPU");
    std::vector<int> sorted = ordinals;
    std::sort(sorted.begin(), sorted.end());
    const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
    if (twice != sorted.end())
        throw Error("GPU " + std::to_string(*twice) + " is named twice: a tensor-parallel rank needs a GPU of its own");
    std::string why;
    const NcclLibrary* nccl = NcclLibrary::get(&why);
    if (!nccl)
        throw Error("tensor parallelism on CUDA needs NCCL: " + why + ". Install it (pip install nvidia-nccl-cu" +
                    std::to_string(CUDART_VERSION / 1000) +
                    ", or the CUDA toolkit's NCCL) or set AKUNU_NCCL_LIBRARY to the path of libnccl.so.2");

    // NCCL's defaults that this process changes unless the user set them (NCCL
    // reads them once, at its first communicator):
    // - NVLink SHARP (NVLS) reductions go through multicast objects, a
    //   resource of the whole host that other processes' jobs share (and can
    //   leak or exhaust), and they pay only for very large reductions; a
    //   decode step's are a few KiB a token.
#ifndef _WIN32
    setenv("NCCL_NVLS_ENABLE", "0", 0);
#endif
    // - Connections (and their buffers, some hundreds of MiB a GPU) are made
    //   at ncclCommInitAll rather than at each algorithm's first use: the
    //   memory is then gone before the model sizes its KV cache from the free
    //   memory, and no enqueue waits on the other ranks (an abort never has to
    //   wait for a rank stuck in one), nor inside a graph capture.
#ifndef _WIN32
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
#endif

    auto group = std::make_shared<NcclGroup>();
    const size_t n = ordinals.size();
    group->nccl = nccl;
    group->devices = ordinals;
    group->comms.assign(n, nullptr);
    group->locks.reset(new std::mutex[n]);
    int dev = -1;
    const bool had_device = cudaGetDevice(&dev) == cudaSuccess;
    const int r = nccl->comm_init_all(group->comms.data(), (int)n, ordinals.data());
    if (had_device) cudaSetDevice(dev);  // (NCCL puts it back too; ours, to be sure)
    if (r != NcclLibrary::kSuccess) fail(*nccl, r, "ncclCommInitAll");
    group->initialized = true;
    const char* p2p = std::getenv("AKUNU_P2P_ALL_REDUCE");
    if (!(p2p && std::string(p2p) == "0")) {
        group->p2p = std::make_unique<P2PAllReduce>(ordinals);
        if (!group->p2p->ok()) group->p2p.reset();
        if (had_device) cudaSetDevice(dev);
    }

    std::vector<std::unique_ptr<Collective>> out;
    out.reserve(n);
    for (size_t i = 0; i < n; i++) out.push_back(std::make_unique<NcclCollective>(group, (int)i));
    return out;
}

}  // namespace akunu
