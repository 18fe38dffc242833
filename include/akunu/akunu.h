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

#ifdef __cplusplus
}
#endif
#endif
