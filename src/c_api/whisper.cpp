// The C API's Whisper speech to text (include/akunu/whisper.h): the handle's
// Whisper state, loading, transcription of files and samples with segment
// callbacks, the last transcript's segments, and the log-mel spectrogram.
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "handle.h"
#include "whisper/transcription/audio_input.h"
#include "whisper/transcription/log_mel.h"
#include "whisper/transcription/transcriber.h"

using namespace akunu_c;
namespace aw = akunu::whisper;

namespace akunu_c {

struct WhisperHandle {
    std::unique_ptr<aw::Transcriber> t;
    bool timestamps = true;  // the Python default
    std::vector<double> temperatures = aw::TranscribeOptions{}.temperatures;
    aw::Transcript last;     // read by akunu_transcript_segment; its text is out_text
};

bool is_whisper_model(const std::string& path) {
    return akunu::open_model_file(path)->get_string("general.architecture") == "whisper";
}

std::shared_ptr<WhisperHandle> load_whisper(const std::string& path, const akunu::LoadOptions& opt) {
    auto w = std::make_shared<WhisperHandle>();
    w->t = std::make_unique<aw::Transcriber>(path, opt);
    return w;
}

const akunu::ModelFile& whisper_file(const WhisperHandle& w) { return w.t->model().file(); }

size_t whisper_memory(const WhisperHandle& w) { return w.t->model().memory_bytes(); }

AkunuModelConfig whisper_config(const WhisperHandle& w) {
    const akunu::WhisperConfig& c = w.t->model().config();
    AkunuModelConfig out{};
    // the text decoder's shape: what generation-style callers would ask about
    out.dim = c.dim;
    out.n_layers = c.n_layers;
    out.n_heads = c.n_heads;
    out.n_kv_heads = c.n_heads;
    out.head_dim = c.n_heads ? c.dim / c.n_heads : 0;
    out.ffn_dim = c.ffn_dim;
    out.vocab_size = c.vocab_size;
    out.context_length = c.n_text_ctx;
    out.n_ctx = c.n_text_ctx;
    out.norm_eps = c.eps;
    std::strncpy(out.architecture, "whisper", sizeof(out.architecture) - 1);
    return out;
}

}  // namespace akunu_c

namespace {

using Clock = std::chrono::steady_clock;

// Where the samples come from: a WAV file, or floats at 16 kHz.
struct AudioSource {
    const char* path = nullptr;
    const float* samples = nullptr;
    int32_t n_samples = 0;
};

void transcribe(akunu_model* model, const AudioSource& src, const char* language, AkunuTranscribeStats* stats,
                akunu_segment_callback callback, void* user_data, const char** out_text, const char* fn) {
    const auto t0 = Clock::now();
    WhisperHandle& w = *live_whisper(model, fn).whisper;
    if (out_text) *out_text = nullptr;
    if (stats) *stats = AkunuTranscribeStats{};
    std::vector<float> audio;
    if (src.path) {
        audio = aw::load_audio_file(src.path);
    } else {
        if (src.n_samples < 0 || (src.n_samples > 0 && !src.samples))
            throw akunu::Error(std::string(fn) + ": bad sample buffer");
        audio = aw::load_audio_samples(src.samples, (size_t)src.n_samples, aw::kSampleRate);
    }
    aw::TranscribeOptions opts;
    opts.language = language ? language : "";
    opts.timestamps = w.timestamps;
    opts.temperatures = w.temperatures;
    w.last = aw::Transcript{};
    std::function<bool(const aw::Segment&)> on_segment;
    if (callback)
        on_segment = [&](const aw::Segment& s) {
            return callback((int32_t)std::llround(s.start * 1000), (int32_t)std::llround(s.end * 1000), s.text.c_str(),
                            user_data);
        };
    w.last = w.t->transcribe(audio, opts, on_segment);
    if (out_text) *out_text = w.last.text.c_str();
    if (stats) {
        AkunuTranscribeStats st{};
        st.audio_ms = (float)(audio.size() * 1000.0 / aw::kSampleRate);
        st.mel_ms = (float)w.last.mel_ms;
        st.encode_ms = (float)w.last.encode_ms;
        st.decode_ms = (float)w.last.decode_ms;
        st.n_windows = w.last.n_windows;
        st.n_segments = (int32_t)w.last.segments.size();
        for (const aw::Segment& s : w.last.segments) st.n_tokens += (int32_t)s.tokens.size();
        std::strncpy(st.language, w.last.language.c_str(), sizeof(st.language) - 1);
        st.total_ms = (float)std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        *stats = st;
    }
}

}  // namespace

extern "C" {

akunu_status akunu_transcribe(akunu_model* model, const char* wav_path, const char* language,
                              AkunuTranscribeStats* stats, const char** out_text) {
    return guarded([&] {
        if (!wav_path || !out_text) {
            live_whisper(model, "akunu_transcribe");
            throw akunu::Error("akunu_transcribe: null argument");
        }
        transcribe(model, AudioSource{wav_path, nullptr, 0}, language, stats, nullptr, nullptr, out_text,
                   "akunu_transcribe");
    });
}

akunu_status akunu_transcribe_pcm(akunu_model* model, const float* samples, int32_t n_samples, const char* language,
                                  AkunuTranscribeStats* stats, const char** out_text) {
    return guarded([&] {
        if (!out_text) {
            live_whisper(model, "akunu_transcribe_pcm");
            throw akunu::Error("akunu_transcribe_pcm: null argument");
        }
        transcribe(model, AudioSource{nullptr, samples, n_samples}, language, stats, nullptr, nullptr, out_text,
                   "akunu_transcribe_pcm");
    });
}

akunu_status akunu_transcribe_stream(akunu_model* model, const char* wav_path, const char* language,
                                     AkunuTranscribeStats* stats, akunu_segment_callback callback, void* user_data,
                                     const char** out_text) {
    return guarded([&] {
        if (!wav_path) {
            live_whisper(model, "akunu_transcribe_stream");
            throw akunu::Error("akunu_transcribe_stream: null argument");
        }
        transcribe(model, AudioSource{wav_path, nullptr, 0}, language, stats, callback, user_data, out_text,
                   "akunu_transcribe_stream");
    });
}

akunu_status akunu_transcribe_pcm_stream(akunu_model* model, const float* samples, int32_t n_samples,
                                         const char* language, AkunuTranscribeStats* stats,
                                         akunu_segment_callback callback, void* user_data, const char** out_text) {
    return guarded([&] {
        transcribe(model, AudioSource{nullptr, samples, n_samples}, language, stats, callback, user_data, out_text,
                   "akunu_transcribe_pcm_stream");
    });
}

akunu_status akunu_set_timestamps(akunu_model* model, bool enabled) {
    return guarded([&] { live_whisper(model, "akunu_set_timestamps").whisper->timestamps = enabled; });
}

akunu_status akunu_set_transcribe_temperatures(akunu_model* model, const double* temperatures, int32_t n) {
    return guarded([&] {
        WhisperHandle& w = *live_whisper(model, "akunu_set_transcribe_temperatures").whisper;
        if (!temperatures || n < 1 || n > 16)
            throw akunu::Error("akunu_set_transcribe_temperatures: give 1 to 16 temperatures");
        for (int32_t i = 0; i < n; i++)
            if (!(temperatures[i] >= 0 && temperatures[i] <= 100))
                throw akunu::Error("akunu_set_transcribe_temperatures: temperature " + std::to_string(temperatures[i]) +
                                   " is not in [0, 100]");
        w.temperatures.assign(temperatures, temperatures + n);
    });
}

int32_t akunu_transcript_segment_count(const akunu_model* model) {
    try {
        const int32_t n = (int32_t)live_whisper(model, "akunu_transcript_segment_count").whisper->last.segments.size();
        clear_error();
        return n;
    } catch (const std::exception& e) {
        set_error(e.what());
        return -1;
    }
}

akunu_status akunu_transcript_segment(const akunu_model* model, int32_t index, int32_t* start_ms, int32_t* end_ms,
                                      const char** text, const int32_t** tokens, int32_t* n_tokens) {
    return guarded([&] {
        const aw::Transcript& t = live_whisper(model, "akunu_transcript_segment").whisper->last;
        if (index < 0 || (size_t)index >= t.segments.size())
            throw akunu::Error("akunu_transcript_segment: index " + std::to_string(index) + " is outside the " +
                               std::to_string(t.segments.size()) + " segments of the last transcription");
        const aw::Segment& s = t.segments[(size_t)index];
        if (start_ms) *start_ms = (int32_t)std::llround(s.start * 1000);
        if (end_ms) *end_ms = (int32_t)std::llround(s.end * 1000);
        if (text) *text = s.text.c_str();
        if (tokens) *tokens = s.tokens.data();
        if (n_tokens) *n_tokens = (int32_t)s.tokens.size();
    });
}

akunu_status akunu_whisper_log_mel(const float* samples, int32_t n_samples, int32_t n_mels, int32_t padding,
                                   float* out, int64_t max_floats, int32_t* n_frames) {
    return guarded([&] {
        if (!n_frames || n_samples < 0 || (n_samples > 0 && !samples) || padding < 0 || n_mels <= 0 || n_mels > 512)
            throw akunu::Error("akunu_whisper_log_mel: bad argument");
        const size_t total = (size_t)n_samples + (size_t)padding;
        *n_frames = (int32_t)(std::max<size_t>(total, aw::kNFft / 2 + 1) / aw::kHopLength);
        if (!out) return;
        const int64_t need = (int64_t)*n_frames * n_mels;
        if (max_floats < need)
            throw akunu::Error("akunu_whisper_log_mel: the buffer holds " + std::to_string(max_floats) + " floats, " +
                               std::to_string(need) + " are needed");
        for (int32_t i = 0; i < n_samples; i++)
            if (!std::isfinite(samples[i])) throw akunu::Error("akunu_whisper_log_mel: NaN or infinite sample");
        const aw::LogMel mel = aw::log_mel_spectrogram(samples, (size_t)n_samples, n_mels, padding);
        std::memcpy(out, mel.data.data(), mel.data.size() * sizeof(float));
    });
}

}  // extern "C"

