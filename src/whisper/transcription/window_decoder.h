// Decoding one 30-second window, as akunu/whisper/decoding.py does
// (openai-whisper's DecodingTask): the logit filters (suppressed tokens, blank
// at the start, timestamp rules), then greedy or sampled (best of N) decoding
// in slot 0 of the model's self-attention cache. The window must be encoded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "whisper/transcription/whisper_tokens.h"
#include "whisper/whisper_model.h"

namespace akunu::whisper {

struct DecodeOptions {
    std::string language;  // "" = "en" (the sot sequence's default)
    bool translate = false;
    bool timestamps = true;
    double temperature = 0.0;
    int best_of = 5;
    bool suppress_blank = true;
    double max_initial_timestamp = 1.0;  // seconds
    uint64_t seed = 0;
};

struct WindowResult {
    std::vector<int32_t> tokens;  // sampled tokens, without the end token
    std::string text;
    double avg_logprob = 0, no_speech_prob = 0, temperature = 0, compression_ratio = 0;
    double sum_logprob = 0;
};

// Python's str.strip(): Unicode whitespace off both ends of UTF-8 text.
std::string strip_text(const std::string& s);
// log_softmax of x in place-free form: x - logsumexp(x).
std::vector<double> log_softmax(const std::vector<double>& x);

class LogitFilters {
public:
    LogitFilters(const WhisperTokens& tok, const DecodeOptions& opts);
    // Masks logits (in place, -inf) before the choice after `sampled`.
    void apply(std::vector<double>& logits, const std::vector<int32_t>& sampled) const;

private:
    void mask(std::vector<double>& logits, const std::vector<int32_t>& sampled) const;
    double timestamp_margin(const std::vector<double>& logits) const;

    const WhisperTokens& tok_;
    DecodeOptions opts_;
    std::vector<int32_t> begin_suppress_;
    int max_initial_ = 0;
};

class WindowDecoder {
public:
    WindowDecoder(WhisperModel& core, const WhisperTokens& tok) : core_(core), tok_(tok) {}

    // <|startofprev|> + the end of `previous` (half the context at most) + the sot sequence.
    std::vector<int32_t> prompt(const std::vector<int32_t>& previous, const DecodeOptions& opts) const;
    WindowResult decode(const std::vector<int32_t>& previous, const DecodeOptions& opts);
    // (code, probability of each language) from the logits after <|startoftranscript|>.
    std::pair<std::string, std::vector<double>> detect_language();

private:
    std::pair<std::vector<int32_t>, double> sample(const std::vector<float>& first, int pos,
                                                   int max_new, const LogitFilters& filters, double temperature,
                                                   class NumpyRng* rng);

    WhisperModel& core_;
    const WhisperTokens& tok_;
};

}  // namespace akunu::whisper
