// A pthread with a caller-sized stack, joined before returning.
#include "text/chat/deep_stack.h"

#include <pthread.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.h"

namespace akunu::text {
namespace {

thread_local size_t t_stack_size = 0;

struct Job {
    const std::function<void()>* fn;
    size_t stack_bytes;
    std::exception_ptr error;
};

void* run_job(void* arg) {
    Job* job = static_cast<Job*>(arg);
    t_stack_size = job->stack_bytes;
    try {
        (*job->fn)();
    } catch (...) {
        job->error = std::current_exception();
    }
    return nullptr;
}

}  // namespace

size_t deep_stack_size() { return t_stack_size; }

void run_with_deep_stack(const std::function<void()>& fn, size_t stack_bytes) {
    constexpr size_t kSmallest = size_t(16) << 20;
    Job job{&fn, stack_bytes, nullptr};
    pthread_t thread;
    int rc = EAGAIN;
    for (; job.stack_bytes >= kSmallest; job.stack_bytes /= 4) {
        pthread_attr_t attr;
        if (pthread_attr_init(&attr) != 0) throw Error("cannot create a thread attribute for the chat template");
        rc = pthread_attr_setstacksize(&attr, job.stack_bytes);
        if (rc == 0) rc = pthread_create(&thread, &attr, run_job, &job);
        pthread_attr_destroy(&attr);
        if (rc == 0 || (rc != EAGAIN && rc != ENOMEM)) break;
    }
    if (rc != 0) throw Error(std::string("cannot start the chat template's thread: ") + std::strerror(rc));
    pthread_join(thread, nullptr);
    if (job.error) std::rethrow_exception(job.error);
}

}  // namespace akunu::text
