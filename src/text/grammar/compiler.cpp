#include "text/grammar/compiler.h"

#include <exception>
#include <string>
#include <utility>

#include "core/error.h"
#include "text/grammar/vocabulary.h"

namespace akunu::text {
namespace {

// xgrammar's compile threads, as the Python package asks for.
constexpr int kCompileThreads = 2;

// The first non-blank line of an xgrammar message (as Python's str(e).strip().splitlines()[0]),
// without the "[hh:mm:ss] file.cc:line: " that xgrammar's checks put before it.
std::string first_line(const char* what) {
    std::string s(what ? what : "");
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = s.find('\n', b);
    std::string line = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.size() > 2 && line[0] == '[') {
        size_t close = line.find("] ");
        if (close != std::string::npos) line.erase(0, close + 2);
        size_t colon = line.find(": ");  // "file.cc:123: "
        size_t cc = line.find(".cc:");
        if (colon != std::string::npos && cc != std::string::npos && cc < colon && line.find(' ') > cc)
            line.erase(0, colon + 2);
    }
    return line;
}

}  // namespace

GrammarCompiler::GrammarCompiler(std::shared_ptr<const Tokenizer> tok, int vocab_size, std::vector<int32_t> stop_ids)
    : tok_(std::move(tok)), vocab_size_(vocab_size), stop_ids_(std::move(stop_ids)) {
    if (!tok_) throw Error("grammar: no tokenizer");
    if (vocab_size_ <= 0) throw Error("grammar: the model has no vocabulary");
}

xgrammar::GrammarCompiler& GrammarCompiler::compiler(bool json_mode) {
    std::lock_guard<std::mutex> l(mu_);
    std::optional<xgrammar::GrammarCompiler>& slot = compilers_[json_mode ? 1 : 0];
    if (!slot) {
        xgrammar::TokenizerInfo info(grammar_vocabulary(*tok_, vocab_size_, json_mode), xgrammar::VocabType::RAW,
                                     vocab_size_, stop_ids_);
        slot.emplace(info, kCompileThreads);
    }
    return *slot;
}

xgrammar::CompiledGrammar GrammarCompiler::compile(const GrammarSpec& spec) {
    xgrammar::GrammarCompiler& c = compiler(spec.json_mode());
    try {
        if (spec.kind == GrammarSpec::Kind::Gbnf) return c.CompileGrammar(spec.source, "root");
        // Compact JSON: free whitespace lets a weak model ramble in spaces forever.
        const std::string schema = spec.kind == GrammarSpec::Kind::JsonSchema ? spec.source : R"({"type": "object"})";
        return c.CompileJSONSchema(schema, /*any_whitespace=*/false);
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {  // xgrammar reports parse errors as exceptions of its own
        throw Error(std::string("invalid ") + spec.name() + " grammar: " + first_line(e.what()));
    }
}

}  // namespace akunu::text
