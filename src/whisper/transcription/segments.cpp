#include "whisper/transcription/segments.h"

#include <cstdio>
#include <cstdlib>

#include "whisper/transcription/whisper_tokens.h"

namespace akunu::whisper {

namespace {
constexpr double kFrameSeconds = 0.01;  // hop 160 at 16 kHz
}

double round3(double x) {
    // printf rounds the exact binary value correctly (ties to even), as
    // Python's round does through its own dtoa
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", x);
    return std::strtod(buf, nullptr);
}

std::vector<TokenSpan> split_segments(const std::vector<int32_t>& tokens, int32_t ts_begin, double time_offset,
                                      int window_frames, int& seek) {
    std::vector<TokenSpan> out;
    const size_t n = tokens.size();
    const bool single_ending = n >= 2 && tokens[n - 2] < ts_begin && ts_begin <= tokens[n - 1];
    std::vector<size_t> cuts;
    for (size_t i = 1; i < n; i++)
        if (tokens[i] >= ts_begin && tokens[i - 1] >= ts_begin) cuts.push_back(i);
    if (!cuts.empty()) {
        if (single_ending) cuts.push_back(n);
        size_t last = 0;
        for (size_t cut : cuts) {
            TokenSpan s;
            s.tokens.assign(tokens.begin() + (long)last, tokens.begin() + (long)cut);
            s.start = time_offset + (s.tokens.front() - ts_begin) * kTimePrecision;
            s.end = time_offset + (s.tokens.back() - ts_begin) * kTimePrecision;
            out.push_back(std::move(s));
            last = cut;
        }
        if (single_ending) seek += window_frames;
        else seek += (tokens[last - 1] - ts_begin) * 2;  // the unfinished segment starts the next window (2 frames per position)
    } else {
        double duration = window_frames * kFrameSeconds;
        int32_t last_stamp = -1;
        for (int32_t t : tokens)
            if (t >= ts_begin) last_stamp = t;
        if (last_stamp >= 0 && last_stamp != ts_begin) duration = (last_stamp - ts_begin) * kTimePrecision;
        out.push_back(TokenSpan{time_offset, time_offset + duration, tokens});
        seek += window_frames;
    }
    return out;
}

}  // namespace akunu::whisper
