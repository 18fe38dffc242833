// A window's tokens cut into segments at timestamp pairs, and where the next
// window starts (akunu/whisper/transcribe.py's split_segments).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace akunu::whisper {

struct TokenSpan {
    double start = 0, end = 0;  // seconds
    std::vector<int32_t> tokens;
};

// Spans of `tokens` (timestamps from ts_begin) in a window at `time_offset`
// seconds, `window_frames` mel frames long; `seek` moves to the next window.
std::vector<TokenSpan> split_segments(const std::vector<int32_t>& tokens, int32_t ts_begin, double time_offset,
                                      int window_frames, int& seek);

// Python's round(x, 3): the double nearest the correctly rounded decimal.
double round3(double x);

}  // namespace akunu::whisper
