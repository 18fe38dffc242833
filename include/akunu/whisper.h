/* akunu C API: speech to text with Whisper models. Included by akunu.h.
 *
 * akunu_load_model loads a Whisper model (GGUF, Hugging Face or CTranslate2
 * directory) like any other; akunu_is_whisper tells it apart. Transcription
 * decodes as the Python package's WhisperModel.transcribe does with its
 * defaults: 30-second windows, timestamp tokens (see akunu_set_timestamps),
 * temperature fallback 0, 0.2, ... 1.0 (best of 5, seed 0) on repetitive or
 * improbable windows, greedy otherwise (see akunu_set_transcribe_temperatures); the same audio gives the same tokens,
 * text and segment times. Text-model functions (akunu_generate, akunu_logits,
 * ...) fail on a Whisper handle, and these fail on a text model. */
#ifndef AKUNU_WHISPER_H
#define AKUNU_WHISPER_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Timings and counts of one transcription. */
typedef struct {
    float audio_ms;     /* length of the audio (16 kHz samples / 16) */
    float mel_ms;       /* log-mel spectrogram */
    float encode_ms;    /* encoder passes: one per window, plus language detection */
    float decode_ms;    /* decoder passes and token choice, fallbacks included */
    float total_ms;     /* the whole call, reading and resampling the audio included */
    int32_t n_windows;  /* encoder passes */
    int32_t n_segments; /* segments produced (up to a callback's stop) */
    int32_t n_tokens;   /* tokens of those segments, timestamp tokens included */
    char language[8];   /* the language decoded in ("en", ...), given or detected */
} AkunuTranscribeStats;

/* Called with each segment as it is decoded: its start and end in ms and its
 * text (valid during the call). Returning false stops the transcription after
 * this segment; the call then succeeds with the text so far. */
typedef bool (*akunu_segment_callback)(int32_t start_ms, int32_t end_ms, const char* text, void* user_data);

/* Transcribes a WAV file (PCM 8/16/24/32-bit or float, any rate: resampled to
 * 16 kHz as the Python path does; channels averaged). `language`: a code such
 * as "en", or NULL to detect it from the first 30 s (English-only models: "en").
 * *out_text receives the transcript, owned by the handle and valid until the
 * next transcription on it or akunu_free_model. `stats` may be NULL. */
akunu_status akunu_transcribe(akunu_model* model, const char* wav_path, const char* language,
                              AkunuTranscribeStats* stats, const char** out_text);
/* The same for n_samples mono float samples at 16 kHz. */
akunu_status akunu_transcribe_pcm(akunu_model* model, const float* samples, int32_t n_samples, const char* language,
                                  AkunuTranscribeStats* stats, const char** out_text);
/* akunu_transcribe with a segment callback (may be NULL); out_text may be NULL. */
akunu_status akunu_transcribe_stream(akunu_model* model, const char* wav_path, const char* language,
                                     AkunuTranscribeStats* stats, akunu_segment_callback callback, void* user_data,
                                     const char** out_text);
akunu_status akunu_transcribe_pcm_stream(akunu_model* model, const float* samples, int32_t n_samples,
                                         const char* language, AkunuTranscribeStats* stats,
                                         akunu_segment_callback callback, void* user_data, const char** out_text);
/* Timestamp tokens on (the default: one segment per phrase, as the Python
 * default) or off (text alone, one segment per 30-second window). */
akunu_status akunu_set_timestamps(akunu_model* model, bool enabled);
/* The temperatures tried on each window: the first, then the next while the
 * text is repetitive or improbable (default 0, 0.2, 0.4, 0.6, 0.8, 1.0, as the
 * Python default). {0} decodes greedily with no fallback, as Python's
 * transcribe(temperature=0.0). n in [1, 16]; the values are copied. */
akunu_status akunu_set_transcribe_temperatures(akunu_model* model, const double* temperatures, int32_t n);

/* Segments of the last transcription on this handle: their count (-1 on
 * error), and each one's times, text and token ids (timestamps included),
 * valid until the next transcription on it or akunu_free_model. Any out-pointer
 * may be NULL. */
int32_t akunu_transcript_segment_count(const akunu_model* model);
akunu_status akunu_transcript_segment(const akunu_model* model, int32_t index, int32_t* start_ms, int32_t* end_ms,
                                      const char** text, const int32_t** tokens, int32_t* n_tokens);

/* Whisper's log-mel spectrogram of n_samples floats at 16 kHz, after appending
 * `padding` zero samples (the transcription uses 160): n_mels rows of
 * *n_frames = max(1, (n_samples + padding) / 160) values, mel-major. `out` (NULL to
 * ask the size) holds max_floats floats; fewer than n_mels * frames is an error. */
akunu_status akunu_whisper_log_mel(const float* samples, int32_t n_samples, int32_t n_mels, int32_t padding,
                                   float* out, int64_t max_floats, int32_t* n_frames);

#ifdef __cplusplus
}
#endif
#endif
