/* akunu C API: grammar-constrained generation. Included by akunu.h. */
#ifndef AKUNU_GRAMMAR_H
#define AKUNU_GRAMMAR_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
