#include "parallel/host_collective.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace akunu {

HostCollectiveGroup::HostCollectiveGroup(int size) : size_(size), slots_((size_t)size, nullptr) {}

// A generation barrier: the last rank to arrive starts the next generation
// and wakes the others.
void HostCollectiveGroup::barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw Error("a tensor-parallel rank failed; this model cannot run further");
    const uint64_t gen = generation_;
    if (++arrived_ == size_) {
        arrived_ = 0;
        generation_++;
        cv_.notify_all();
        return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) throw Error("a tensor-parallel rank failed; this model cannot run further");
}

void HostCollectiveGroup::abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
}

HostCollective::HostCollective(std::shared_ptr<HostCollectiveGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

// Every rank sums all ranks' values in rank order (the same bits everywhere),
// then, once nobody reads the inputs any more, overwrites its own.
void HostCollective::all_reduce_sum(float* x, size_t n, void*) {
    if (sum_.size() < n) sum_.resize(n);  // grows once, to the largest pass
    group_->publish(rank_, x);
    group_->barrier();
    std::copy(group_->slot(0), group_->slot(0) + n, sum_.begin());
    for (int r = 1; r < size(); r++) {
        const float* s = group_->slot(r);
        for (size_t i = 0; i < n; i++) sum_[i] += s[i];
    }
    group_->barrier();
    std::memcpy(x, sum_.data(), n * sizeof(float));
}

void HostCollective::all_gather(const float* src, float* dst, size_t n, void*) {
    group_->publish(rank_, src);
    group_->barrier();
    for (int r = 0; r < size(); r++) std::memcpy(dst + (size_t)r * n, group_->slot(r), n * sizeof(float));
    group_->barrier();  // src may change only once every rank has copied it
}

std::vector<std::unique_ptr<Collective>> make_host_collectives(int size) {
    auto group = std::make_shared<HostCollectiveGroup>(size);
    std::vector<std::unique_ptr<Collective>> out;
    for (int r = 0; r < size; r++) out.push_back(std::make_unique<HostCollective>(group, r));
    return out;
}

}  // namespace akunu
