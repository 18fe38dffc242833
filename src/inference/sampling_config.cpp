#include "inference/sampling_config.h"

#include <cmath>
#include <string>

#include "cache/sampler_buffers.h"
#include "core/error.h"

namespace akunu {

namespace {
void require(bool ok, const std::string& what) {
    if (!ok) throw Error("invalid sampling setting: " + what);
}
}  // namespace

void SamplingConfig::validate(int vocab_size) const {
    require(std::isfinite(temperature) && temperature >= 0.0f,
            "temperature must be >= 0, got " + std::to_string(temperature));
    require(top_k >= 0, "top_k must be >= 0 (0 = off), got " + std::to_string(top_k));
    require(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f,
            "top_p must be in (0, 1], got " + std::to_string(top_p));
    require(std::isfinite(min_p) && min_p >= 0.0f && min_p <= 1.0f,
            "min_p must be in [0, 1], got " + std::to_string(min_p));
    require(std::isfinite(repeat_penalty) && repeat_penalty > 0.0f,
            "repeat_penalty must be > 0 (1 = off), got " + std::to_string(repeat_penalty));
    require(std::isfinite(presence_penalty), "presence_penalty must be finite");
    require(std::isfinite(frequency_penalty), "frequency_penalty must be finite");
    require(penalty_window >= 0, "penalty window must be >= 0, got " + std::to_string(penalty_window));
    require(logit_bias.size() <= (size_t)SamplerBuffers::kMaxBias,
            "at most " + std::to_string(SamplerBuffers::kMaxBias) + " logit_bias entries");
    for (const auto& b : logit_bias) {
        require(b.first >= 0 && b.first < vocab_size,
                "logit_bias token id " + std::to_string(b.first) + " is outside the vocabulary (size " +
                    std::to_string(vocab_size) + ")");
        require(!std::isnan(b.second) && b.second != INFINITY,
                "logit_bias value for token " + std::to_string(b.first) + " must be a number or -inf");
    }
}

SampleParams SamplingConfig::to_params(int vocab_size, bool use_mask) const {
    SampleParams p{};
    p.vocab = (uint32_t)vocab_size;
    p.temperature = temperature;
    p.top_k = (uint32_t)top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = repeat_penalty;
    p.presence_penalty = presence_penalty;
    p.frequency_penalty = frequency_penalty;
    p.penalty_window = (uint32_t)penalty_window;
    p.n_bias = (uint32_t)logit_bias.size();
    p.seed_lo = (uint32_t)seed;
    p.seed_hi = (uint32_t)(seed >> 32);
    p.use_mask = use_mask ? 1u : 0u;
    return p;
}

}  // namespace akunu
