// Collective operations between the ranks of a tensor-parallel model (one
// rank a device). The table builder emits them as ordinary commands
// ("all_reduce_sum", "all_gather_cols"); each backend's launcher of those
// commands calls the collective its device was given (Device::set_collective):
// an in-memory one between threads on the CPU (parallel/host_collective.h),
// NCCL on CUDA. Every rank must issue the same collectives in the same order.
#pragma once
#include <cstddef>

namespace akunu {

class Collective {
public:
    virtual ~Collective() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // x[0..n) = the sum of every rank's x[0..n), the same bits on every rank
    // (so the replicated residual stream never drifts between ranks).
    // `stream`: the backend's queue (cudaStream_t on CUDA, nullptr on the CPU);
    // a GPU collective is enqueued there and may be captured in a graph.
    virtual void all_reduce_sum(float* x, size_t n, void* stream) = 0;
    // acc[0..n) += the sum of every rank's x[0..n), in one operation where the
    // collective has one (then x is left unspecified); false: it did nothing,
    // and the caller reduces (all_reduce_sum) and adds.
    virtual bool all_reduce_add(float* x, float* acc, size_t n, void* stream) {
        (void)x, (void)acc, (void)n, (void)stream;
        return false;
    }
    // dst[r * n .. (r + 1) * n) = rank r's src[0..n), for every rank r.
    virtual void all_gather(const float* src, float* dst, size_t n, void* stream) = 0;
    // Fails the collectives in flight and all later ones (a rank that threw
    // must not leave the others waiting for it forever).
    virtual void abort() {}
};

}  // namespace akunu
