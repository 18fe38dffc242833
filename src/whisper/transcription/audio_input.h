// Audio in for a transcription: a WAV file (any rate, any channel count) or
// float samples, checked and brought to 16 kHz mono float32 as
// akunu/whisper/audio.py's load_audio does.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace akunu::whisper {

constexpr int kSampleRate = 16000;
// Longer inputs are refused rather than allocated (audio.py's MAX_SECONDS).
constexpr double kMaxSeconds = 4 * 3600;

// 16 kHz mono samples of a WAV file.
std::vector<float> load_audio_file(const std::string& path);
// Checked copy of mono float samples at `sample_rate` Hz, resampled to 16 kHz.
std::vector<float> load_audio_samples(const float* samples, size_t n, int sample_rate);

}  // namespace akunu::whisper
