// A small fork-join pool for the CPU backend. Workers spin briefly between
// dispatches (decode issues hundreds of short kernels per token, so sleeping
// on a condition variable each time would cost more than the work), then
// fall back to yielding.
#pragma once
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace akunu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    int size() const { return n_threads_; }

    // Calls fn(begin, end) over [0, n) split into contiguous chunks, one per
    // thread (the caller runs the first); returns when all are done.
    void parallel_for(int n, const std::function<void(int, int)>& fn);

private:
    void worker(int id);
    int n_threads_;
    std::vector<std::thread> threads_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    const std::function<void(int, int)>* job_ = nullptr;
    int job_n_ = 0;
};

}  // namespace akunu
