// Long-form transcription in C++ (akunu/whisper/transcribe.py and model.py's
// transcribe): the log-mel of the whole input, 30-second windows from a seek
// position, temperature fallback on repetitive or improbable output, silence
// skipping, segments cut at timestamp pairs, the previous text as the prompt
// of the next window, and language detection when none is given.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inference/model.h"
#include "whisper/transcription/whisper_tokens.h"
#include "whisper/whisper_model.h"

namespace akunu::whisper {

struct TranscribeOptions {
    std::string language;  // "" = detected from the first 30 s
    bool translate = false;
    bool timestamps = true;
    std::vector<double> temperatures{0.0, 0.2, 0.4, 0.6, 0.8, 1.0};
    int best_of = 5;
    uint64_t seed = 0;
    bool condition_on_previous_text = true;
    // openai-whisper's thresholds
    double compression_ratio_threshold = 2.4;
    double log_prob_threshold = -1.0;
    double no_speech_threshold = 0.6;
    double prompt_reset_on_temperature = 0.5;
};

struct Segment {
    int id = 0;
    int seek = 0;  // window start, in mel frames
    double start = 0, end = 0;  // seconds, rounded to ms
    std::string text;
    std::vector<int32_t> tokens;
    double avg_logprob = 0, compression_ratio = 0, no_speech_prob = 0, temperature = 0;
};

struct Transcript {
    std::string text;  // the segments' text, stripped
    std::vector<Segment> segments;
    std::string language;
    double duration = 0;  // seconds of audio (mel frames x 10 ms)
    bool stopped = false;  // the segment callback asked to stop
    int n_windows = 0;     // encoder passes
    double mel_ms = 0, encode_ms = 0, decode_ms = 0, total_ms = 0;
};

class Transcriber {
public:
    // Loads the model (GGUF, Hugging Face or CTranslate2 directory) with one
    // decoder cache slot (greedy and sampled decoding; no beam search).
    Transcriber(const std::string& path, const LoadOptions& opt);

    WhisperModel& model() { return *model_; }
    const WhisperTokens& tokens() const { return *tokens_; }

    // 16 kHz mono samples to text; `on_segment` (may be empty) sees each
    // segment as it is decoded and returns false to stop after it.
    Transcript transcribe(const std::vector<float>& samples, const TranscribeOptions& opts,
                          const std::function<bool(const Segment&)>& on_segment);

private:
    std::unique_ptr<WhisperModel> model_;
    std::unique_ptr<WhisperTokens> tokens_;
};

}  // namespace akunu::whisper
