/* akunu C API: tokenization, detokenization and text embeddings. Included by akunu.h. */
#ifndef AKUNU_TEXT_H
#define AKUNU_TEXT_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
