// Rate conversion to Whisper's 16 kHz as the Python path does it (scipy's
// resample_poly with its default Kaiser-windowed FIR filter), so a file at any
// rate gives the same samples in C as in Python.
#pragma once
#include <vector>

namespace akunu::whisper {

// Polyphase resampling by up/down = target/rate (reduced), computed in double
// and rounded to float as resample_poly on float64 input then astype(float32).
std::vector<float> resample_poly(const std::vector<float>& x, int rate, int target);

}  // namespace akunu::whisper
