/* akunu C API: grammar-constrained generation. Included by akunu.h. */
#ifndef AKUNU_GRAMMAR_H
#define AKUNU_GRAMMAR_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A compiled grammar for one model (opaque): the output must match GBNF text,
 * a JSON Schema, or be any JSON object. Grammar handles are checked like model
 * handles; one may serve any number of generations on its model, one at a
 * time, and is freed with akunu_grammar_free (before or after its model). */
typedef struct akunu_grammar akunu_grammar;
typedef akunu_grammar* akunu_grammar_t; /* the book's name for the handle */

/* GBNF text (xgrammar's EBNF dialect, root rule `root`). Malformed text is an
 * error naming the problem; *out is then NULL. The first grammar of a model
 * builds its token table (a moment for a large vocabulary). */
akunu_status akunu_grammar_create(akunu_model* model, const char* gbnf, akunu_grammar** out);
/* A JSON Schema (JSON text); the output is compact JSON that validates. */
akunu_status akunu_grammar_create_from_schema(akunu_model* model, const char* schema_json, akunu_grammar** out);
/* Any JSON object, compact (OpenAI's json_object mode). */
akunu_status akunu_grammar_create_json(akunu_model* model, akunu_grammar** out);
/* Freeing NULL, or a handle twice, does nothing. */
void akunu_grammar_free(akunu_grammar* grammar);

/* akunu_generate_stream under `grammar` (made for this model): clears the
 * context, prefills the prompt, then generates up to max_tokens tokens, each
 * one drawn with `sampling` (NULL: greedy) among the tokens the grammar
 * allows and handed to `callback` (may be NULL). Generation ends after a stop
 * id (emitted), when the callback returns false, or when the grammar is
 * complete and the model chose its end-of-generation token (emitted; the
 * grammar offers only such tokens once nothing more can follow). The
 * grammar starts over on every call. `stats` may be NULL. */
akunu_status akunu_generate_grammar(akunu_model* model, const int32_t* prompt, int32_t n_prompt, int32_t max_tokens,
                                    const AkunuSamplingConfig* sampling, akunu_grammar* grammar,
                                    const int32_t* stop_ids, int32_t n_stop, akunu_token_callback callback,
                                    void* user_data, AkunuGenerationStats* stats);
/* The same, keeping the cached context: only new_tokens are prefilled. */
akunu_status akunu_generate_grammar_continue(akunu_model* model, const int32_t* new_tokens, int32_t n_new,
                                             int32_t max_tokens, const AkunuSamplingConfig* sampling,
                                             akunu_grammar* grammar, const int32_t* stop_ids, int32_t n_stop,
                                             akunu_token_callback callback, void* user_data,
                                             AkunuGenerationStats* stats);

#ifdef __cplusplus
}
#endif
#endif
