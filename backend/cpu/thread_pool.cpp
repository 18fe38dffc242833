#include "thread_pool.h"

namespace akunu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_threads_; i++) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    for (auto& t : threads_) t.join();
}

static void run_chunk(const RangeFn& fn, int n, int parts, int id) {
    int begin = (int)((long long)n * id / parts);
    int end = (int)((long long)n * (id + 1) / parts);
    if (begin < end) fn(begin, end);
}

void ThreadPool::worker(int id) {
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        uint64_t g;
        while ((g = generation_.load(std::memory_order_acquire)) == seen) {
            if (++spins > 20000) std::this_thread::yield();
        }
        seen = g;
        if (stop_.load()) return;
        run_chunk(*job_, job_n_, n_threads_, id);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::run(int n, const RangeFn& fn) {
    if (n_threads_ == 1 || n < 2) {
        if (n > 0) fn(0, n);
        return;
    }
    job_ = &fn;
    job_n_ = n;
    pending_.store(n_threads_ - 1, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    run_chunk(fn, n, n_threads_, 0);
    while (pending_.load(std::memory_order_acquire) != 0) {
    }
}

}  // namespace akunu
