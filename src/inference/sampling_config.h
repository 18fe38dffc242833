// What the user asks of the sampler (Python's SamplingConfig, the C API's
// AkunuSamplingConfig). The meaning of each knob is the CPU sample kernel's
// (backend/cpu/kernels/sampling.cpp).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/kernel_params.h"

namespace akunu {

struct SamplingConfig {
    float temperature = 0.0f;  // 0: greedy
    int top_k = 0;             // 0: off
    float top_p = 1.0f;        // 1: off
    float min_p = 0.0f;        // 0: off
    float repeat_penalty = 1.0f;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int penalty_window = 64;  // latest context tokens the penalties see (llama.cpp's repeat_last_n)
    uint64_t seed = 0;
    std::vector<std::pair<int32_t, float>> logit_bias;

    // Throws Error naming the first invalid value.
    void validate(int vocab_size) const;
    bool penalizes() const {
        return penalty_window > 0 && (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
    }
    SampleParams to_params(int vocab_size, bool use_mask) const;
};

}  // namespace akunu
