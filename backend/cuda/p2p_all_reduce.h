// A one-shot all-reduce over the peer-to-peer links (NVLink) of the GPUs of
// one process, for the small reductions of decode steps, where NCCL's
// per-operation latency (some 15-20 us) is most of their cost: each rank's
// kernel writes its values into every other rank's receive slots, waits
// until every rank's values landed in its own (an empty slot holds a
// sentinel: no separate signal), then sums them in rank order (the same bits
// on every rank, whatever the message size or rank count).
// One kernel, no host work: it is captured in the decode graphs like any
// other. NCCL keeps the large reductions (prefill passes).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace akunu {

class P2PAllReduce {
public:
    static constexpr int kMaxRanks = 8;
    static constexpr int kBlocks = 16;           // every launch has them all (see the .cu)
    static constexpr size_t kMaxFloats = 1 << 18;  // largest reduction served (1 MiB)

    // Enables peer access between every pair of `ordinals` and allocates each
    // rank's buffers; ok() is false (and nothing is kept) where a pair has no
    // peer access or an allocation fails: NCCL then serves every reduction.
    explicit P2PAllReduce(const std::vector<int>& ordinals);
    ~P2PAllReduce();
    bool ok() const { return ok_; }
    bool serves(size_t n) const { return ok_ && n <= kMaxFloats; }

    // x[0..n) summed over the ranks, in place, on `stream` (rank `rank`'s GPU
    // current); with `acc`, acc[0..n) += the sum instead (x is left as it was).
    void run(int rank, float* x, size_t n, cudaStream_t stream, float* acc = nullptr) const;
    // Makes kernels waiting for a rank that will never come return (a rank failed).
    void abort();

    struct Rank {
        float* recv = nullptr;        // [2 parities][ranks][kMaxFloats], empty slots -0.0f
        uint32_t* epochs = nullptr;   // [kBlocks]: this rank's last epoch (its own)
    };

private:
    std::vector<int> devices_;
    std::vector<Rank> ranks_;
    volatile uint32_t* abort_host_ = nullptr;  // mapped pinned memory the kernels poll while they wait
    uint32_t* abort_device_ = nullptr;
    bool ok_ = false;
    bool programmatic_ = false;  // launched as a programmatic dependent (sm_90+: launch_pdl's contract)
    void release();
};

}  // namespace akunu
