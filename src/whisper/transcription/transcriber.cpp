#include "whisper/transcription/transcriber.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "core/error.h"
#include "whisper/transcription/log_mel.h"
#include "whisper/transcription/segments.h"
#include "whisper/transcription/window_decoder.h"

namespace akunu::whisper {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// decode_with_fallback: retry hotter while the text is too repetitive or
// improbable (but not when it is silence); if every temperature fails, the most
// probable non-repetitive result, marked with the last temperature tried.
WindowResult decode_with_fallback(WindowDecoder& dec, const std::vector<int32_t>& previous, const DecodeOptions& base,
                                  const TranscribeOptions& o) {
    std::vector<WindowResult> results, below_cr;
    double last_t = 0;
    for (double t : o.temperatures) {
        DecodeOptions w = base;
        w.temperature = t;
        last_t = t;
        WindowResult r = dec.decode(previous, w);
        results.push_back(r);
        bool fallback = false;
        if (r.compression_ratio > o.compression_ratio_threshold) fallback = true;
        else below_cr.push_back(r);
        if (r.avg_logprob < o.log_prob_threshold) fallback = true;
        if (r.no_speech_prob > o.no_speech_threshold && r.avg_logprob < o.log_prob_threshold) fallback = false;
        if (!fallback) return r;
    }
    const std::vector<WindowResult>& pool = below_cr.empty() ? results : below_cr;
    size_t best = 0;
    for (size_t i = 1; i < pool.size(); i++)
        if (pool[i].avg_logprob > pool[best].avg_logprob) best = i;  // the first of equals, as max()
    WindowResult r = pool[best];
    r.temperature = last_t;
    return r;
}

}  // namespace

Transcriber::Transcriber(const std::string& path, const LoadOptions& opt) {
    model_ = std::make_unique<WhisperModel>(path, opt, 1);
    tokens_ = std::make_unique<WhisperTokens>(path, model_->file(), model_->config().vocab_size);
}

Transcript Transcriber::transcribe(const std::vector<float>& samples, const TranscribeOptions& opts,
                                   const std::function<bool(const Segment&)>& on_segment) {
    const auto t_start = Clock::now();
    if (opts.temperatures.empty()) throw Error("no temperatures to decode with");
    for (double t : opts.temperatures)
        if (!(t >= 0)) throw Error("temperatures must be non-negative");
    WhisperModel& m = *model_;
    const WhisperTokens& tok = *tokens_;
    Transcript out;

    auto t0 = Clock::now();
    const LogMel mel = log_mel_spectrogram(samples.data(), samples.size(), m.config().n_mels, kHopLength);
    out.mel_ms = ms_since(t0);
    const int content_frames = mel.n_frames - 1;  // the last frame is padding
    out.duration = round3(content_frames * 0.01);

    std::string language = opts.language;
    for (char& c : language) c = (char)std::tolower((unsigned char)c);
    WindowDecoder dec(m, tok);
    if (language.empty()) {
        if (!tok.multilingual) {
            language = "en";
        } else {
            // from the first window as it is cut for detection (pad_or_trim of
            // mel[:, :3000], which may hold the padding frame)
            t0 = Clock::now();
            const std::vector<float> win = mel_window(mel, 0, std::min(mel.n_frames, kWindowFrames));
            m.encode(win.data(), win.size());
            out.encode_ms += ms_since(t0);
            out.n_windows++;
            t0 = Clock::now();
            language = dec.detect_language().first;
            out.decode_ms += ms_since(t0);
        }
    }
    if (!tok.multilingual && language != "en")
        throw Error("this model is English-only; language '" + language + "' is not available");
    if (tok.multilingual && tok.language_token(language) < 0) throw Error("unknown language '" + language + "'");
    if (opts.translate && !tok.multilingual) throw Error("this model is English-only and cannot translate");
    out.language = language;

    DecodeOptions base;
    base.language = language;
    base.translate = opts.translate;
    base.timestamps = opts.timestamps;
    base.best_of = opts.best_of;
    base.seed = opts.seed;

    int seek = 0;
    std::vector<int32_t> all_tokens;
    size_t prompt_reset = 0;
    while (seek < content_frames && !out.stopped) {
        const int window_frames = std::min(kWindowFrames, content_frames - seek);
        const double time_offset = seek * 0.01;
        t0 = Clock::now();
        const std::vector<float> win = mel_window(mel, seek, window_frames);
        m.encode(win.data(), win.size());
        out.encode_ms += ms_since(t0);
        out.n_windows++;
        t0 = Clock::now();
        const std::vector<int32_t> previous(all_tokens.begin() + (long)prompt_reset, all_tokens.end());
        WindowResult r = decode_with_fallback(dec, previous, base, opts);
        out.decode_ms += ms_since(t0);
        bool skip = r.no_speech_prob > opts.no_speech_threshold;
        if (r.avg_logprob > opts.log_prob_threshold) skip = false;  // confident text despite the silence token
        if (skip) {
            seek += window_frames;
            continue;
        }
        const int window_start = seek;
        for (TokenSpan& span : split_segments(r.tokens, tok.timestamp_begin, time_offset, window_frames, seek)) {
            std::string text = tok.decode(span.tokens);
            if (span.start == span.end || strip_text(text).empty()) continue;
            all_tokens.insert(all_tokens.end(), span.tokens.begin(), span.tokens.end());
            Segment s;
            s.id = (int)out.segments.size();
            s.seek = window_start;
            s.start = round3(span.start);
            s.end = round3(span.end);
            s.text = std::move(text);
            s.tokens = std::move(span.tokens);
            s.avg_logprob = r.avg_logprob;
            s.compression_ratio = r.compression_ratio;
            s.no_speech_prob = r.no_speech_prob;
            s.temperature = r.temperature;
            out.segments.push_back(s);
            if (on_segment && !on_segment(out.segments.back())) {
                out.stopped = true;
                break;
            }
        }
        if (!opts.condition_on_previous_text || r.temperature > opts.prompt_reset_on_temperature)
            prompt_reset = all_tokens.size();
    }
    std::string joined;
    for (const Segment& s : out.segments) joined += s.text;
    out.text = strip_text(joined);
    out.total_ms = ms_since(t_start);
    return out;
}

}  // namespace akunu::whisper
