// WAV files in for Whisper without libsndfile: RIFF/WAVE with PCM (8, 16, 24,
// 32-bit) or IEEE float (32, 64-bit) samples, also as WAVE_FORMAT_EXTENSIBLE.
// Samples become floats as libsndfile scales them (the Python path reads files
// through soundfile), channels are averaged to mono as numpy's mean does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace akunu::whisper {

struct WavAudio {
    std::vector<float> mono;  // frames, channels averaged
    int sample_rate = 0;
    int channels = 0;
};

// Parses a WAV file held in memory; `what` names it in errors ("'x.wav'").
// A data chunk cut short keeps its whole frames, as libsndfile does.
WavAudio parse_wav(const uint8_t* data, size_t size, const std::string& what);
// Reads and parses the file at `path` (missing, unreadable and non-WAV files
// are AudioError with a message naming the file).
WavAudio read_wav_file(const std::string& path);

}  // namespace akunu::whisper
