#include "thread_pool.h"

#include <chrono>

namespace akunu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_threads_; i++) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    publish();
    for (auto& t : threads_) t.join();
}

// seq_cst on generation_ and sleepers_: either the publisher sees a sleeper
// and notifies, or the sleeper sees the new generation before it waits.
void ThreadPool::publish() {
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lk(sleep_mutex_);
        wake_.notify_all();
    }
}

void ThreadPool::wait_for_generation(uint64_t seen) {
    using clock = std::chrono::steady_clock;
    const auto spin_until = clock::now() + std::chrono::milliseconds(2);
    for (int spins = 0; generation_.load(std::memory_order_acquire) == seen; spins++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((spins & 1023) != 1023 || clock::now() < spin_until) continue;
        std::unique_lock<std::mutex> lk(sleep_mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lk, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
    }
}

static void run_chunk(const RangeFn& fn, int n, int parts, int id) {
    int begin = (int)((long long)n * id / parts);
    int end = (int)((long long)n * (id + 1) / parts);
    if (begin < end) fn(begin, end);
}

void ThreadPool::worker(int id) {
    uint64_t seen = 0;
    for (;;) {
        wait_for_generation(seen);
        seen = generation_.load(std::memory_order_acquire);
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
    publish();
    run_chunk(fn, n, n_threads_, 0);
    while (pending_.load(std::memory_order_acquire) != 0) {
    }
}

}  // namespace akunu
