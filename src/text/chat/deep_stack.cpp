// A pthread with a caller-sized stack, joined before returning.
#include "text/chat/deep_stack.h"

#include <pthread.h>

#include <cstring>
#include <exception>
#include <string>

#include "core/error.h"

namespace akunu::text {
namespace {

struct Job {
    const std::function<void()>* fn;
    std::exception_ptr error;
};

void* run_job(void* arg) {
    Job* job = static_cast<Job*>(arg);
    try {
        (*job->fn)();
    } catch (...) {
        job->error = std::current_exception();
    }
    return nullptr;
}

}  // namespace

void run_with_deep_stack(const std::function<void()>& fn, size_t stack_bytes) {
    Job job{&fn, nullptr};
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) throw Error("cannot create a thread attribute for the chat template");
    int rc = pthread_attr_setstacksize(&attr, stack_bytes);
    pthread_t thread;
    if (rc == 0) rc = pthread_create(&thread, &attr, run_job, &job);
    pthread_attr_destroy(&attr);
    if (rc != 0) throw Error(std::string("cannot start the chat template's thread: ") + std::strerror(rc));
    pthread_join(thread, nullptr);
    if (job.error) std::rethrow_exception(job.error);
}

}  // namespace akunu::text
