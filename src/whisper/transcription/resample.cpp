#include "whisper/transcription/resample.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace akunu::whisper {

namespace {

// Modified Bessel function of the first kind, order 0 (power series; the
// argument stays small: beta = 5).
double bessel_i0(double x) {
    double sum = 1.0, term = 1.0;
    const double q = x * x / 4.0;
    for (int k = 1; k < 200; k++) {
        term *= q / ((double)k * k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

double sinc(double x) {
    if (x == 0.0) return 1.0;
    const double px = M_PI * x;
    return std::sin(px) / px;
}

// scipy.signal.firwin(numtaps, cutoff, window=('kaiser', beta)) for a low-pass
// (cutoff relative to Nyquist), scaled to unit gain at DC.
std::vector<double> firwin_kaiser(int numtaps, double cutoff, double beta) {
    std::vector<double> h((size_t)numtaps);
    const double alpha = 0.5 * (numtaps - 1);
    const double i0_beta = bessel_i0(beta);
    double sum = 0.0;
    for (int n = 0; n < numtaps; n++) {
        const double m = n - alpha;
        const double r = (n - alpha) / alpha;
        const double win = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / i0_beta;
        h[(size_t)n] = cutoff * sinc(cutoff * m) * win;
        sum += h[(size_t)n];
    }
    for (double& v : h) v /= sum;
    return h;
}

}  // namespace

std::vector<float> resample_poly(const std::vector<float>& x, int rate, int target) {
    if (rate == target) return x;
    const int g = std::gcd(rate, target);
    const long up = target / g, down = rate / g;
    const long n_in = (long)x.size();
    const long n_out = (n_in * up) / down + ((n_in * up) % down != 0);
    const long max_rate = std::max(up, down);
    const long half_len = 10 * max_rate;
    std::vector<double> h = firwin_kaiser((int)(2 * half_len + 1), 1.0 / (double)max_rate, 5.0);
    for (double& v : h) v *= (double)up;
    const long L = (long)h.size();
    // resample_poly pads the filter in front so output sample 0 lines up with
    // input sample 0, and drops the first n_pre_remove outputs of upfirdn.
    const long n_pre_pad = down - half_len % down;
    const long n_pre_remove = (half_len + n_pre_pad) / down;
    std::vector<float> y((size_t)n_out);
    for (long o = 0; o < n_out; o++) {
        // upfirdn: y[i] = sum_k hp[k] * xup[i*down - k], xup[j*up] = x[j]; hp = h delayed by n_pre_pad
        const long t = (o + n_pre_remove) * down - n_pre_pad;  // index into the unpadded filter frame
        // taps k = t - j*up in [0, L): j in [ceil((t-L+1)/up), floor(t/up)]
        long j_hi = t >= 0 ? t / up : -((-t + up - 1) / up);
        const long lo_num = t - L + 1;
        long j_lo = lo_num >= 0 ? (lo_num + up - 1) / up : -((-lo_num) / up);
        j_lo = std::max(j_lo, 0L);
        j_hi = std::min(j_hi, n_in - 1);
        double acc = 0.0;
        for (long j = j_lo; j <= j_hi; j++) acc += h[(size_t)(t - j * up)] * (double)x[(size_t)j];
        y[(size_t)o] = (float)acc;
    }
    return y;
}

}  // namespace akunu::whisper
