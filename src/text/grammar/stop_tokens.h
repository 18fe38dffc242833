// The ids that end a model's generation (Python's Model.stop_ids): the end of
// the grammar is where xgrammar lets one of them through.
#pragma once
#include <cstdint>
#include <vector>

#include "text/tokenizer.h"
#include "weight/model_file.h"

namespace akunu::text {

// The EOS / EOT / EOM ids of the metadata (and the tokenizer's EOS), plus the
// control tokens spelled as an end of turn or text ("<end_of_turn>",
// "<|im_end|>", "</s>", ...); sorted, each once.
std::vector<int32_t> end_of_generation_ids(const Tokenizer& tok, const ModelFile& file);

}  // namespace akunu::text
