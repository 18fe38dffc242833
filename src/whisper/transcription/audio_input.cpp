#include "whisper/transcription/audio_input.h"

#include <cmath>
#include <cstdio>

#include "whisper/transcription/audio_error.h"
#include "whisper/transcription/resample.h"
#include "whisper/transcription/wav_reader.h"

namespace akunu::whisper {

namespace {

// load_audio's checks, in its order, then the rate conversion.
std::vector<float> checked(std::vector<float> data, int rate) {
    if (rate <= 0) throw AudioError("sample_rate must be positive, got " + std::to_string(rate));
    if (data.empty()) throw AudioError("the audio has no samples");
    if ((double)data.size() / rate > kMaxSeconds) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "the audio is %.1f h long; the limit is %d h", (double)data.size() / rate / 3600,
                      (int)(kMaxSeconds / 3600));
        throw AudioError(buf);
    }
    for (float v : data)
        if (!std::isfinite(v)) throw AudioError("the audio contains NaN or infinite samples");
    return resample_poly(data, rate, kSampleRate);
}

}  // namespace

std::vector<float> load_audio_file(const std::string& path) {
    WavAudio w = read_wav_file(path);
    return checked(std::move(w.mono), w.sample_rate);
}

std::vector<float> load_audio_samples(const float* samples, size_t n, int sample_rate) {
    if (!samples && n > 0) throw AudioError("null sample pointer");
    return checked(std::vector<float>(samples, samples + n), sample_rate);
}

}  // namespace akunu::whisper
