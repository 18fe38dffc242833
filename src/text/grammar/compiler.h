// One per model: xgrammar's compilers over the model's vocabulary, built on
// first use (one for GBNF, one for the JSON kinds) and kept with their cache
// of compiled grammars (Python's akunu.grammar.GrammarCompiler).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <xgrammar/xgrammar.h>

#include "text/grammar/grammar_spec.h"
#include "text/tokenizer.h"

namespace akunu::text {

class GrammarCompiler {
public:
    // `vocab_size`: the model's logits width; `stop_ids`: the ids that may end
    // the output where the grammar is complete (end_of_generation_ids).
    GrammarCompiler(std::shared_ptr<const Tokenizer> tok, int vocab_size, std::vector<int32_t> stop_ids);

    // Throws akunu::Error("invalid <kind> grammar: ...") when xgrammar rejects
    // the grammar or schema. Safe to call from several threads.
    xgrammar::CompiledGrammar compile(const GrammarSpec& spec);

    int vocab_size() const { return vocab_size_; }
    const std::shared_ptr<const Tokenizer>& tokenizer() const { return tok_; }

private:
    xgrammar::GrammarCompiler& compiler(bool json_mode);

    std::shared_ptr<const Tokenizer> tok_;
    int vocab_size_;
    std::vector<int32_t> stop_ids_;
    std::mutex mu_;  // guards the two slots below while they are built
    std::optional<xgrammar::GrammarCompiler> compilers_[2];  // [json_mode]
};

}  // namespace akunu::text
