// The collectives of a tensor-parallel model on CUDA (core/collective.h):
// NCCL, one communicator a GPU, all made by one ncclCommInitAll in this
// process (one rank a GPU, each driven by its own host thread with its GPU
// current). The operations are enqueued on the rank's stream and may be
// captured in its CUDA graphs (kernels/collective.cu launches them).
#pragma once
#include <memory>
#include <vector>

#include "core/collective.h"

namespace akunu {

struct NcclGroup;  // the communicators of one make_nccl_collectives (nccl_collective.cpp)

class NcclCollective : public Collective {
public:
    NcclCollective(std::shared_ptr<NcclGroup> group, int rank);
    ~NcclCollective() override;

    int rank() const override { return rank_; }
    int size() const override;
    // ncclAllReduce (float, sum) in place on `stream` (a cudaStream_t of this
    // rank's GPU). NCCL reduces each element once and sends that result to
    // every rank (ring and tree alike), so every rank holds the same bits.
    void all_reduce_sum(float* x, size_t n, void* stream) override;
    // acc += the sum, in one peer-to-peer kernel where it serves n values;
    // false (nothing done) where NCCL would serve the reduction.
    bool all_reduce_add(float* x, float* acc, size_t n, void* stream) override;
    // ncclAllGather on `stream`: dst[r * n, (r + 1) * n) = rank r's src.
    void all_gather(const float* src, float* dst, size_t n, void* stream) override;
    // Aborts every communicator of the group (ncclCommAbort, which makes
    // kernels in flight quit); from then on every operation of any rank
    // throws. Callable from any thread, any number of times.
    void abort() override;

    // Whether the group was aborted (then no graph holding its operations may
    // be launched: CudaDevice checks before each launch).
    bool aborted() const;
    // The CUDA ordinal of this rank's GPU.
    int device() const;

private:
    std::shared_ptr<NcclGroup> group_;
    int rank_;
};

// One collective a GPU of `ordinals` (rank r on GPU ordinals[r]), through
// one ncclCommInitAll. An akunu::Error when NCCL does not load (saying which
// files were tried) or the communicators cannot be made.
//
// Teardown order: NCCL (2.26+) frees a communicator only once every CUDA
// graph holding its operations is gone, so the rank devices (their graphs)
// must be destroyed before these collectives; after an abort the
// communicators are released on a helper thread once those graphs are gone,
// and the last collective's destructor waits for it.
std::vector<std::unique_ptr<Collective>> make_nccl_collectives(const std::vector<int>& ordinals);

}  // namespace akunu
