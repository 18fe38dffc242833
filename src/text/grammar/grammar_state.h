// A compiled grammar's position in one generation and the mask of the tokens
// allowed next (Python's akunu.grammar.GrammarState).
#pragma once
#include <cstdint>
#include <vector>

#include <xgrammar/xgrammar.h>

namespace akunu::text {

class GrammarState {
public:
    // The compiled grammar's vocabulary is the model's logits width (GrammarCompiler).
    explicit GrammarState(const xgrammar::CompiledGrammar& compiled);

    // One bit per token of the model (1 = allowed), the form Model::set_mask takes.
    const std::vector<uint32_t>& mask_words();
    // Moves past `token`; throws akunu::Error when the grammar rejects it.
    void accept(int32_t token);
    // True once a stop token was accepted where the grammar is complete.
    bool terminated() const;
    // Back to the start of the grammar (each generation starts here).
    void reset();

private:
    xgrammar::GrammarMatcher matcher_;
    std::vector<uint32_t> words_;
    int64_t shape_ = 0;
};

}  // namespace akunu::text
