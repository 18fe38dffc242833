/* akunu C API: chat formatting through the model's template. Included by akunu.h. */
#ifndef AKUNU_CHAT_H
#define AKUNU_CHAT_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
