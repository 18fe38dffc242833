/* Transcribes a WAV file with a Whisper model through the C API alone, for
 * tests/test_c_whisper.py: prints each segment as the callback sees it, then
 * the segments kept on the handle with their tokens, the text and the stats.
 *   whisper_check MODEL WAV [LANGUAGE|-] [TIMESTAMPS 0|1] [STOP_AFTER]  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akunu/akunu.h"

struct seen {
    int count, stop_after;
};

static bool on_segment(int32_t start_ms, int32_t end_ms, const char* text, void* user_data) {
    struct seen* s = (struct seen*)user_data;
    printf("callback\t%d\t%d\t%s\n", (int)start_ms, (int)end_ms, text);
    s->count++;
    return s->stop_after <= 0 || s->count < s->stop_after;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL WAV [LANGUAGE|-] [TIMESTAMPS 0|1] [STOP_AFTER]\n", argv[0]);
        return 2;
    }
    const char* language = argc > 3 && strcmp(argv[3], "-") != 0 ? argv[3] : NULL;
    AkunuLoadParams params = {"cpu", 0, 1};
    akunu_model* model = NULL;
    if (akunu_load_model(argv[1], &params, &model) != AKUNU_OK) {
        fprintf(stderr, "load: %s\n", akunu_last_error());
        return 1;
    }
    int status = 1;
    if (akunu_is_whisper(model) != 1) {
        fprintf(stderr, "not a Whisper model\n");
        goto done;
    }
    if (argc > 4 && akunu_set_timestamps(model, atoi(argv[4]) != 0) != AKUNU_OK) goto fail;
    struct seen seen = {0, argc > 5 ? atoi(argv[5]) : 0};
    AkunuTranscribeStats stats;
    const char* text = NULL;
    if (akunu_transcribe_stream(model, argv[2], language, &stats, on_segment, &seen, &text) != AKUNU_OK) goto fail;
    int32_t n = akunu_transcript_segment_count(model);
    for (int32_t i = 0; i < n; i++) {
        int32_t start_ms, end_ms, n_tokens;
        const char* seg_text;
        const int32_t* tokens;
        if (akunu_transcript_segment(model, i, &start_ms, &end_ms, &seg_text, &tokens, &n_tokens) != AKUNU_OK)
            goto fail;
        printf("segment\t%d\t%d\t%s\t", (int)start_ms, (int)end_ms, seg_text);
        for (int32_t k = 0; k < n_tokens; k++) printf(k ? " %d" : "%d", (int)tokens[k]);
        printf("\n");
    }
    printf("text\t%s\n", text);
    printf("stats\t%d\t%d\t%d\t%s\t%.1f\n", (int)stats.n_windows, (int)stats.n_segments, (int)stats.n_tokens,
           stats.language, (double)stats.audio_ms);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "error: %s\n", akunu_last_error());
done:
    akunu_free_model(model);
    return status;
}
