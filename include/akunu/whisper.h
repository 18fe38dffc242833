/* akunu C API: speech to text with Whisper models. Included by akunu.h. */
#ifndef AKUNU_WHISPER_H
#define AKUNU_WHISPER_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
