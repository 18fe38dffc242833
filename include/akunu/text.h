/* akunu C API: tokenization, detokenization and text embeddings. Included by akunu.h.
 *
 * The tokenizer is the model's own (a GGUF file's tokenizer.ggml.* metadata, a
 * model directory's tokenizer.json), built in C++ on the first call that needs
 * it; its ids and text equal the Python package's (Model.tokenize and
 * Model.detokenize, which run Hugging Face `tokenizers`). Text is UTF-8,
 * NUL-terminated (so it cannot hold U+0000); text that is not valid UTF-8 is
 * an error. */
#ifndef AKUNU_TEXT_H
#define AKUNU_TEXT_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Token ids of `text`. add_special puts the model's BOS (or [CLS] ... [SEP]) in
 * place, as Model.tokenize(add_bos=True) does; special-token text written in
 * `text` (e.g. "<start_of_turn>") is read as those tokens either way.
 * *n_tokens receives the number of ids; out_tokens receives them when
 * max_tokens is at least that. A smaller buffer is an error whose message
 * gives the count needed (also in *n_tokens), and nothing is written to it. */
akunu_status akunu_encode(akunu_model* model, const char* text, bool add_special, int32_t* out_tokens,
                          int32_t max_tokens, int32_t* n_tokens);
/* The number of ids akunu_encode gives for `text`. */
akunu_status akunu_token_count(akunu_model* model, const char* text, bool add_special, int32_t* n_tokens);
/* The bytes token `token_id` stands for in generated text: "" for control
 * tokens, one byte for a byte-fallback token, so that one character of several
 * bytes may span tokens (join the bytes of consecutive tokens before reading
 * them as UTF-8). *text points at *n_bytes bytes followed by a NUL (the bytes
 * may hold a NUL themselves), valid until the model is freed. */
akunu_status akunu_decode_token(akunu_model* model, int32_t token_id, const char** text, int32_t* n_bytes);
/* Text of n_ids token ids, as Model.detokenize gives it; skip_special leaves
 * control tokens out. *n_bytes receives the text's length in bytes; the text
 * and a NUL are written to out when out_size is at least *n_bytes + 1, else
 * the call fails naming the size needed and writes nothing to out. */
akunu_status akunu_decode(akunu_model* model, const int32_t* ids, int32_t n_ids, bool skip_special, char* out,
                          int32_t out_size, int32_t* n_bytes);
/* The pooled (and, per the model, L2-normalized) embedding of `text` from an
 * embedding model, as Model.embed gives it: the text is tokenized with its
 * [CLS] ... [SEP]; a text longer than the model's max_seq_length keeps its
 * first tokens and the closing [SEP] when `truncate`, else is an error. out
 * receives akunu_embedding_dim floats; a smaller max_dims is an error. A
 * generative model is an error. */
akunu_status akunu_embed_text(akunu_model* model, const char* text, bool truncate, float* out, int32_t max_dims);

#ifdef __cplusplus
}
#endif
#endif
