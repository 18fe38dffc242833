/* akunu C API: opaque handles, POD structs, status codes. Errors never abort;
 * the message of the last failure on this thread is akunu_last_error(). */
#ifndef AKUNU_H
#define AKUNU_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

const char* akunu_last_error(void);
akunu_status akunu_load_model(const char* path, const AkunuLoadParams* params, akunu_model** out);
void akunu_free_model(akunu_model* model);
akunu_status akunu_get_config(const akunu_model* model, AkunuModelConfig* out);
/* Logits after every token, from position 0: out has n_tokens * vocab floats. */
akunu_status akunu_logits(akunu_model* model, const int32_t* tokens, int32_t n_tokens, float* out);
/* Greedy generation: prefill the prompt (appending to the cached context),
 * then chain-decode up to max_tokens, stopping after any id in stop_ids.
 * Writes the generated ids to out and their count to n_out. */
akunu_status akunu_generate_greedy(akunu_model* model, const int32_t* prompt, int32_t n_prompt,
                                   int32_t max_tokens, const int32_t* stop_ids, int32_t n_stop,
                                   int32_t* out, int32_t* n_out);
/* Like akunu_generate_greedy, drawing each token with `sampling` (NULL or
 * temperature 0: greedy). Invalid settings fail before any work. */
AkunuSamplingConfig akunu_default_sampling(void);
akunu_status akunu_generate(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
                            const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop,
                            int32_t* out, int32_t* n_out);
/* Embedding models (BERT): floats per embedding; 0 for a generative model. */
int32_t akunu_embedding_dim(const akunu_model* model);
/* Pooled (and, per the model, L2-normalized) embeddings of n_seqs token
 * sequences; seqs[i] holds lens[i] ids with the model's special tokens
 * ([CLS] ... [SEP]) in place. out receives n_seqs * akunu_embedding_dim floats.
 * A generative model is an error. */
akunu_status akunu_embed(akunu_model* model, const int32_t* const* seqs, const int32_t* lens, int32_t n_seqs,
                         float* out);
/* Forget the cached context. */
void akunu_reset(akunu_model* model);

/* Many independent requests at once through the continuous-batching engine,
 * every weight read once a step for all of them: prompts[i] holds
 * n_prompts[i] ids; each request generates up to max_tokens, ending after a
 * stop id, with `sampling` (NULL: greedy). Each request gets the tokens it
 * gets alone in the engine, whatever else runs beside it (as the Python
 * API's Model.generate_batch). out holds n_requests * max_tokens ids, request
 * i's from out[i * max_tokens]; n_out[i] receives how many it made. The
 * handle's single-stream context is left as it was. */
akunu_status akunu_generate_batch(akunu_model* model, const int32_t* const* prompts, const int32_t* n_prompts,
                                  int32_t n_requests, int32_t max_tokens, const AkunuSamplingConfig* sampling,
                                  const int32_t* stop_ids, int32_t n_stop, int32_t* out, int32_t* n_out);

/* --- Low-level decode loop (greedy) --- */
/* Appends tokens at the current position; *out_token is the argmax after them. */
akunu_status akunu_prefill(akunu_model* model, const int32_t* tokens, int32_t n_tokens, int32_t* out_token);
/* Feeds `token` at `position` (at most akunu_get_position; a smaller one drops
 * the context after it); *out_token is the argmax that follows. */
akunu_status akunu_decode_step(akunu_model* model, int32_t token, int32_t position, int32_t* out_token);
/* Up to `count` greedy steps from first_token at start_position, chained on
 * the device; out_tokens holds count ids, *n_out receives how many were made. */
akunu_status akunu_chain_decode(akunu_model* model, int32_t first_token, int32_t start_position, int32_t count,
                                int32_t* out_tokens, int32_t* n_out);
/* Tokens in the cached context; -1 for a bad handle. */
int32_t akunu_get_position(const akunu_model* model);
/* Speculative decoding for greedy generation (akunu_generate_greedy, and
 * akunu_generate / _stream / _continue without sampling): drafts from n-gram
 * statistics of the context are verified in one batched pass, giving the
 * tokens of plain greedy decoding, several per pass where the text repeats.
 * Off by default; a bad handle sets akunu_last_error. */
void akunu_set_speculation(akunu_model* model, bool enabled);
/* Draft tokens proposed and accepted during the last generation on this handle. */
akunu_status akunu_speculation_stats(const akunu_model* model, int32_t* drafted, int32_t* accepted);

/* --- Streaming generation --- */
/* Clears the context, prefills the prompt, then generates up to max_tokens,
 * calling `callback` (may be NULL) with each token; stops after a stop id or
 * when the callback returns false. `sampling` NULL: greedy. `stats` may be NULL. */
akunu_status akunu_generate_stream(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
                                   const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop,
                                   akunu_token_callback callback, void* user_data, AkunuGenerationStats* stats);
/* The same, keeping the cached context: only new_tokens are prefilled. */
akunu_status akunu_generate_continue(akunu_model* model, const int32_t* new_tokens, int32_t n_new, int32_t max_tokens,
                                     const AkunuSamplingConfig* sampling, const int32_t* stop_ids, int32_t n_stop,
                                     akunu_token_callback callback, void* user_data, AkunuGenerationStats* stats);

/* --- Inspection: failures return -1, NULL or 0 with akunu_last_error set --- */
int32_t akunu_tensor_count(const akunu_model* model);
/* Valid until the model is freed. */
const char* akunu_tensor_name(const akunu_model* model, int32_t index);
/* GGML type id of the tensor as loaded. */
int32_t akunu_tensor_dtype(const akunu_model* model, int32_t index);
/* Name of that type ("F16", "Q8_0", "BF16", ...); static storage. */
const char* akunu_tensor_raw_dtype(const akunu_model* model, int32_t index);
/* Bytes held by weights, KV cache, scratch and sampler buffers. */
size_t akunu_model_memory(const akunu_model* model);
/* 1 for a Whisper model, 0 otherwise, -1 for a bad handle. */
int32_t akunu_is_whisper(const akunu_model* model);

/* --- Profiling --- */
/* Runs one decode step of `token` at `position` (must equal
 * akunu_get_position) command by command, writing each command's time in ms;
 * the step is undone. Returns the number of entries, or -1 (also when more
 * than max_entries would be written). */
int32_t akunu_profile_decode_step(akunu_model* model, int32_t token, int32_t position, float* timing_out,
                                  int32_t max_entries);
/* Label of entry `index` of the last profile; valid until the next profile. */
const char* akunu_profile_label(const akunu_model* model, int32_t index);

#ifdef __cplusplus
}
#endif

#include "text.h"
#include "chat.h"
#include "grammar.h"
#include "whisper.h"
#endif
