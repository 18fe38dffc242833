// xgrammar's view of a model's vocabulary (Python's GrammarCompiler._compiler):
// one byte string per id of the model's logits, which can be wider than the
// tokenizer's vocabulary (padded embeddings).
#pragma once
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace akunu::text {

// Token bytes for ids 0 .. model_vocab - 1; "" for control, unused and
// padding ids (xgrammar never allows those). In JSON mode tokens holding a
// control character (below 0x20) are withheld too: compact JSON has none
// outside escapes, and xgrammar's string rule would let them through.
std::vector<std::string> grammar_vocabulary(const Tokenizer& tok, int model_vocab, bool json_mode);

}  // namespace akunu::text
