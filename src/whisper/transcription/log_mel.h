// Whisper's log-mel spectrogram, as akunu/whisper/mel.py computes it: 25 ms
// periodic Hann windows every 10 ms (n_fft 400, hop 160 at 16 kHz) over the
// reflect-padded signal, power spectrum, Slaney mel filters with Slaney
// normalization, log10 with a 1e-10 floor, an 80 dB range below the maximum of
// the whole input, then (x + 4) / 4.
#pragma once
#include <cstddef>
#include <vector>

namespace akunu::whisper {

constexpr int kNFft = 400;
constexpr int kHopLength = 160;
constexpr int kWindowFrames = 3000;  // 30 s

struct LogMel {
    int n_mels = 0;
    int n_frames = 0;
    std::vector<float> data;  // [n_mels][n_frames], mel-major as mel.py returns it

    float at(int mel, int frame) const { return data[(size_t)mel * n_frames + frame]; }
};

// [n_mels, (n + padding) / 160] log-mel of 16 kHz samples after appending
// `padding` zeros (mel.py's log_mel_spectrogram).
LogMel log_mel_spectrogram(const float* samples, size_t n, int n_mels, int padding);

// The frame-major [3000, n_mels] window starting at `first` frame, `count`
// frames long, zero-padded to 3000 frames (mel.py's pad_or_trim, transposed
// for the encoder).
std::vector<float> mel_window(const LogMel& mel, int first, int count);

}  // namespace akunu::whisper
