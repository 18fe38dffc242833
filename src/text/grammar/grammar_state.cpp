#include "text/grammar/grammar_state.h"

#include <string>

#include "core/error.h"

namespace akunu::text {

GrammarState::GrammarState(const xgrammar::CompiledGrammar& compiled)
    : matcher_(compiled),
      words_((size_t)xgrammar::GetBitmaskSize(compiled.GetTokenizerInfo().GetVocabSize()), 0u),
      shape_((int64_t)words_.size()) {}

const std::vector<uint32_t>& GrammarState::mask_words() {
    DLTensor t{};
    t.data = words_.data();  // xgrammar writes int32 words; the bits are the same
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = xgrammar::GetBitmaskDLType();
    t.shape = &shape_;
    t.strides = nullptr;
    t.byte_offset = 0;
    matcher_.FillNextTokenBitmask(&t);
    return words_;
}

void GrammarState::accept(int32_t token) {
    if (!matcher_.AcceptToken(token))
        throw Error("token " + std::to_string(token) + " violates the grammar (internal error: the mask allowed it)");
}

bool GrammarState::terminated() const { return matcher_.IsTerminated(); }

void GrammarState::reset() { matcher_.Reset(); }

}  // namespace akunu::text
