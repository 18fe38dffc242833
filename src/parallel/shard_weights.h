// Megatron-style tensor parallelism over N ranks: what each rank holds.
//   - attention: each rank a contiguous block of query heads and the KV
//     heads they read (replicated when there are fewer KV heads than ranks);
//     Q, K, V (and their biases) split by rows, the output projection by
//     columns, whose partial sums one all-reduce adds up;
//   - FFN: gate and up split by rows, down by columns, then one all-reduce;
//     mixture-of-experts models split every expert's FFN the same way (the
//     router is replicated, so every rank picks the same experts);
//   - the logit projection split by vocabulary rows, its slices gathered;
//   - embeddings, norms and everything on the residual stream replicated.
#pragma once
#include <vector>

#include "core/arch_descriptor.h"
#include "core/model_config.h"
#include "core/model_weights.h"

namespace akunu {

class ModelFile;
class TensorParallelDevice;

// The dimensions one rank of n works with (heads, KV heads, FFN widths,
// experts, the vocabulary slice); a model that cannot be split n ways (by
// its dimensions, or by its tensors' block sizes: `file`) is a clear error,
// before any device is made.
ModelConfig shard_config(const ModelConfig& c, const ArchDescriptor& arch, const ModelFile& file, int n);

// Each rank's slices of `host` (weights read on the host, in the file's
// layout: a WeightProvider over a host device), placed on that rank's device
// (regrouped as it asks) and composed into buffers of `dev`. The composed
// buffers are appended to `owned`: the caller frees them through `dev`.
ModelWeights shard_weights(const ModelWeights& host, const ModelConfig& global, const ModelConfig& local,
                           TensorParallelDevice& dev, std::vector<Buffer>& owned);

}  // namespace akunu
