// The collectives of a tensor-parallel model whose ranks are threads of this
// process over host memory (the CPU backend): each rank publishes its buffer,
// every rank computes the same result from all of them, in rank order, so
// every rank holds the same bits. Used by CpuDevice ranks, and the
// reference the GPU collectives are checked against.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/collective.h"

namespace akunu {

// What the ranks of one group share: the published pointers and a barrier.
class HostCollectiveGroup {
public:
    explicit HostCollectiveGroup(int size);
    int size() const { return size_; }
    // Waits until every rank has arrived (or throws once the group is aborted).
    void barrier();
    void abort();
    void publish(int rank, const float* p) { slots_[(size_t)rank] = p; }
    const float* slot(int rank) const { return slots_[(size_t)rank]; }

private:
    int size_;
    std::vector<const float*> slots_;
    std::mutex mutex_;
    std::condition_variable cv_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    bool aborted_ = false;
};

class HostCollective : public Collective {
public:
    HostCollective(std::shared_ptr<HostCollectiveGroup> group, int rank);
    int rank() const override { return rank_; }
    int size() const override { return group_->size(); }
    void all_reduce_sum(float* x, size_t n, void* stream) override;
    void all_gather(const float* src, float* dst, size_t n, void* stream) override;
    void abort() override { group_->abort(); }

private:
    std::shared_ptr<HostCollectiveGroup> group_;
    int rank_;
    std::vector<float> sum_;  // this rank's result before it overwrites its own buffer
};

// One collective a rank, all of one group.
std::vector<std::unique_ptr<Collective>> make_host_collectives(int size);

}  // namespace akunu
