#include "whisper/transcription/log_mel.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace akunu::whisper {

namespace {

using cd = std::complex<double>;

double hz_to_mel(double f) {
    // Slaney: linear below 1 kHz, logarithmic above (librosa's htk=False)
    if (f >= 1000.0) return 15.0 + std::log(std::max(f, 1e-10) / 1000.0) / (std::log(6.4) / 27.0);
    return 3.0 * f / 200.0;
}

double mel_to_hz(double m) {
    if (m >= 15.0) return 1000.0 * std::exp((std::log(6.4) / 27.0) * (m - 15.0));
    return 200.0 * m / 3.0;
}

// numpy.linspace(start, stop, num): start + i * step, the last value exactly stop.
std::vector<double> linspace(double start, double stop, int num) {
    std::vector<double> v((size_t)num);
    const double step = (stop - start) / (num - 1);
    for (int i = 0; i < num; i++) v[(size_t)i] = start + i * step;
    v[(size_t)num - 1] = stop;
    return v;
}

// [n_mels][201] triangular filters with unit area, rounded to float as mel.py's are.
std::vector<float> make_filters(int n_mels) {
    const int n_bins = kNFft / 2 + 1;
    const std::vector<double> fft_freqs = linspace(0.0, 8000.0, n_bins);
    std::vector<double> edges = linspace(hz_to_mel(0.0), hz_to_mel(8000.0), n_mels + 2);
    for (double& e : edges) e = mel_to_hz(e);
    std::vector<float> w((size_t)n_mels * n_bins);
    for (int m = 0; m < n_mels; m++) {
        const double enorm = 2.0 / (edges[(size_t)m + 2] - edges[(size_t)m]);
        for (int b = 0; b < n_bins; b++) {
            const double lower = -(edges[(size_t)m] - fft_freqs[(size_t)b]) / (edges[(size_t)m + 1] - edges[(size_t)m]);
            const double upper = (edges[(size_t)m + 2] - fft_freqs[(size_t)b]) / (edges[(size_t)m + 2] - edges[(size_t)m + 1]);
            w[(size_t)m * n_bins + b] = (float)(std::max(0.0, std::min(lower, upper)) * enorm);
        }
    }
    return w;
}

const std::vector<float>& filters(int n_mels) {
    static std::mutex mu;
    static std::map<int, std::vector<float>> cache;
    std::lock_guard<std::mutex> l(mu);
    auto it = cache.find(n_mels);
    if (it == cache.end()) it = cache.emplace(n_mels, make_filters(n_mels)).first;
    return it->second;
}

// Mixed-radix Cooley-Tukey DFT of n = product of small primes (400 = 2^4 5^2):
// out[k] = sum_j in[j * stride] * exp(-2 pi i j k / n). `tw` holds the N-th
// roots of unity of the top-level size; a sub-transform of size n uses every
// (N / n)-th one.
void fft(const cd* in, size_t stride, size_t n, cd* out, const std::vector<cd>& tw, size_t N) {
    if (n == 1) {
        out[0] = in[0];
        return;
    }
    size_t p = 2;
    while (n % p) p++;
    const size_t m = n / p;
    for (size_t r = 0; r < p; r++) fft(in + r * stride, stride * p, m, out + r * m, tw, N);
    const size_t step = N / n;
    cd tmp[8];
    for (size_t k = 0; k < m; k++) {
        for (size_t r = 0; r < p; r++) tmp[r] = out[r * m + k];
        for (size_t q = 0; q < p; q++) {
            cd acc = 0;
            const size_t kk = k + q * m;
            for (size_t r = 0; r < p; r++) acc += tmp[r] * tw[(r * kk % n) * step];
            out[kk] = acc;
        }
    }
}

}  // namespace

LogMel log_mel_spectrogram(const float* samples, size_t n, int n_mels, int padding) {
    if (n_mels <= 0 || n_mels > 512) throw Error("n_mels must be in [1, 512], got " + std::to_string(n_mels));
    if (padding < 0) throw Error("negative mel padding");
    std::vector<float> x(samples, samples + n);
    x.resize(n + (size_t)padding, 0.0f);
    const size_t half = kNFft / 2;
    if (x.size() <= half) x.resize(half + 1, 0.0f);  // reflect padding needs more than half a window
    // numpy.pad(mode="reflect"): mirrored about the edge samples, which are not repeated
    const size_t len = x.size();
    std::vector<float> padded(len + 2 * half);
    for (size_t i = 0; i < half; i++) padded[i] = x[half - i];
    std::copy(x.begin(), x.end(), padded.begin() + half);
    for (size_t i = 0; i < half; i++) padded[half + len + i] = x[len - 2 - i];

    const int n_frames = (int)((padded.size() - kNFft) / kHopLength);  // the last STFT frame is dropped
    const int n_bins = kNFft / 2 + 1;
    float hann[kNFft];
    for (int i = 0; i < kNFft; i++) hann[i] = (float)(0.5 - 0.5 * std::cos(2 * M_PI * i / kNFft));
    std::vector<cd> tw(kNFft);
    for (int j = 0; j < kNFft; j++) tw[(size_t)j] = std::polar(1.0, -2 * M_PI * j / kNFft);

    const std::vector<float>& w = filters(n_mels);
    LogMel out;
    out.n_mels = n_mels;
    out.n_frames = n_frames;
    out.data.assign((size_t)n_mels * n_frames, 0.0f);
    std::vector<cd> frame(kNFft), spec(kNFft);
    std::vector<float> power((size_t)n_bins);
    float max_log = -INFINITY;
    for (int f = 0; f < n_frames; f++) {
        const float* src = padded.data() + (size_t)f * kHopLength;
        for (int i = 0; i < kNFft; i++) frame[(size_t)i] = (double)(src[i] * hann[i]);  // float32 product, as numpy
        fft(frame.data(), 1, kNFft, spec.data(), tw, kNFft);
        for (int b = 0; b < n_bins; b++) power[(size_t)b] = (float)std::norm(spec[(size_t)b]);
        for (int m = 0; m < n_mels; m++) {
            const float* wm = w.data() + (size_t)m * n_bins;
            double acc = 0.0;
            for (int b = 0; b < n_bins; b++) acc += (double)wm[b] * power[(size_t)b];
            const float v = (float)std::log10(std::max((double)(float)acc, 1e-10));
            out.data[(size_t)m * n_frames + f] = v;
            max_log = std::max(max_log, v);
        }
    }
    const float floor = max_log - 8.0f;
    for (float& v : out.data) v = (std::max(v, floor) + 4.0f) / 4.0f;
    return out;
}

std::vector<float> mel_window(const LogMel& mel, int first, int count) {
    std::vector<float> win((size_t)kWindowFrames * mel.n_mels, 0.0f);
    const int frames = std::min(count, kWindowFrames);
    for (int t = 0; t < frames; t++)
        for (int m = 0; m < mel.n_mels; m++) win[(size_t)t * mel.n_mels + m] = mel.at(m, first + t);
    return win;
}

}  // namespace akunu::whisper
