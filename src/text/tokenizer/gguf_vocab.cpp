// The tokenizer of a GGUF file, built from its tokenizer.ggml.* metadata as
// the Python package's GGUFTokenizer builds it with HF `tokenizers`
// (akunu/tokenizer.py): llama = BPE over merges ranked by the pieces' scores,
// with byte fallback; gpt2 = byte-level BPE behind the pre-tokenizer regexes
// llama.cpp names by tokenizer.ggml.pre; bert = WordPiece.
#include <algorithm>
#include <tuple>

#include "core/error.h"
#include "text/tokenizer/regex_split.h"
#include "text/tokenizer/text_tokenizer.h"
#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {
namespace {

using Meta = std::map<std::string, GGUFValue>;

const GGUFValue* get(const Meta& md, const std::string& key) {
    auto it = md.find(key);
    return it == md.end() ? nullptr : &it->second;
}

bool is_int_type(GGUFType t) {
    return t == GGUFType::UINT8 || t == GGUFType::INT8 || t == GGUFType::UINT16 || t == GGUFType::INT16 ||
           t == GGUFType::UINT32 || t == GGUFType::INT32 || t == GGUFType::UINT64 || t == GGUFType::INT64;
}

// An integer value (as Python sees it), or nullopt when absent or not an integer.
std::optional<int64_t> get_int(const Meta& md, const std::string& key) {
    const GGUFValue* v = get(md, key);
    if (!v || !is_int_type(v->type)) return std::nullopt;
    if (v->type == GGUFType::UINT64) return int64_t(v->u);
    return v->i;
}

bool truthy(const GGUFValue& v) {
    switch (v.type) {
        case GGUFType::BOOL: return v.b;
        case GGUFType::STRING: return !v.s.empty();
        case GGUFType::FLOAT32:
        case GGUFType::FLOAT64: return v.f != 0;
        case GGUFType::ARRAY: return v.array_len > 0;
        case GGUFType::UINT64: return v.u != 0;
        default: return v.i != 0;
    }
}

bool get_bool(const Meta& md, const std::string& key, bool def) {
    const GGUFValue* v = get(md, key);
    return v ? truthy(*v) : def;
}

const std::vector<std::string>& string_array(const Meta& md, const std::string& key) {
    const GGUFValue* v = get(md, key);
    if (!v || v->type != GGUFType::ARRAY || v->elem_type != GGUFType::STRING)
        throw UnsupportedError("the model file has no tokenizer (" + key + " missing)");
    return v->strings;
}

std::string piece_of(const std::vector<std::string>& tokens, std::optional<int64_t> id) {
    return id && *id >= 0 && size_t(*id) < tokens.size() ? tokens[size_t(*id)] : std::string();
}
bool valid_id(const std::vector<std::string>& tokens, std::optional<int64_t> id) {
    return id && *id >= 0 && size_t(*id) < tokens.size();
}

std::unordered_map<std::string, int32_t> last_id_vocab(const std::vector<std::string>& tokens) {
    std::unordered_map<std::string, int32_t> v;
    v.reserve(tokens.size() * 2);
    for (size_t i = 0; i < tokens.size(); ++i) v[tokens[i]] = int32_t(i);  // a later duplicate wins, as {t: i} does
    return v;
}

const std::string kMeta = "\xE2\x96\x81";  // U+2581

// SentencePiece merges from scores: (a, b) is a merge when a, b and a + b are
// pieces; merges whose result scores highest come first.
void build_spm(Pipeline& p, const Meta& md, const Vocabulary& v) {
    const size_t n = v.tokens.size();
    std::vector<double> scores(n, 0.0);
    if (const GGUFValue* s = get(md, "tokenizer.ggml.scores"); s && truthy(*s)) {
        if (s->floats.size() < n) throw FormatError("tokenizer.ggml.scores is shorter than the vocabulary");
        scores.assign(s->floats.begin(), s->floats.begin() + long(n));
    }
    // views into v.tokens: the cuts below look up millions of substrings without copying them
    std::unordered_map<std::string_view, int32_t> ids;
    ids.reserve(n * 2);
    for (size_t i = 0; i < n; ++i) ids[v.tokens[i]] = int32_t(i);  // a later duplicate wins, as {t: i} does
    struct Ranked {
        double neg_score;
        int32_t i, ia, ib;
    };
    std::vector<Ranked> ranked;
    for (size_t i = 0; i < n; ++i) {
        if (v.types[i] != NORMAL && v.types[i] != USER_DEFINED) continue;
        std::string_view piece = v.tokens[i];
        // cuts at code point boundaries
        for (size_t b = 1; b < piece.size(); ++b) {
            if (((unsigned char)piece[b] & 0xC0) == 0x80) continue;
            auto ia = ids.find(piece.substr(0, b));
            if (ia == ids.end()) continue;
            auto ib = ids.find(piece.substr(b));
            if (ib == ids.end()) continue;
            ranked.push_back({-scores[i], int32_t(i), ia->second, ib->second});
        }
    }
    std::sort(ranked.begin(), ranked.end(), [](const Ranked& x, const Ranked& y) {
        return std::tie(x.neg_score, x.i, x.ia, x.ib) < std::tie(y.neg_score, y.i, y.ia, y.ib);
    });
    std::vector<MergeIds> merges;
    merges.reserve(ranked.size());
    for (auto& r : ranked) merges.push_back({r.ia, r.ib, ids.at(v.tokens[size_t(r.i)])});
    BpeOptions opt;
    auto unk_id = md.count("tokenizer.ggml.unknown_token_id") ? get_int(md, "tokenizer.ggml.unknown_token_id")
                                                               : std::optional<int64_t>(0);
    if (valid_id(v.tokens, unk_id)) opt.unk_token = piece_of(v.tokens, unk_id);
    opt.byte_fallback = true;
    opt.fuse_unk = true;
    p.model = make_bpe(last_id_vocab(v.tokens), merges, opt);
    bool space_prefix = get_bool(md, "tokenizer.ggml.add_space_prefix", true);
    std::vector<NormalizerPtr> norm;
    if (space_prefix) norm.push_back(make_prepend(kMeta));
    norm.push_back(make_replace(" ", kMeta));
    p.normalizer = make_sequence_normalizer(norm);
    std::vector<DecoderPtr> dec{make_replace_decoder(kMeta, " "), make_byte_fallback_decoder(), make_fuse_decoder()};
    if (space_prefix) dec.push_back(make_strip_decoder(' ', 1, 0));
    p.decoder = make_sequence_decoder(dec);
}

// tokenizer.ggml.pre -> the regexes applied in turn (llama.cpp's table, as akunu/tokenizer.py has it)
std::vector<std::string> pre_regexes(const std::string& pre) {
    if (pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo") return {kGpt2RegexNoTrailing};
    if (pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe") return {kLlama3Regex};
    if (pre == "qwen2") return {kQwen2Regex};
    if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm")
        return {kDigitRegex, kGpt2RegexNoTrailing};
    if (pre == "gpt-4o") return {kGpt4oRegex};  // OpenAI's o200k (gpt-oss), as llama.cpp rewrites it
    throw UnsupportedError("pre-tokenizer '" + pre +
                           "' is not supported (known: command-r, dbrx, default, gpt-2, gpt-4o, gpt2, llama-bpe, llama3, "
                           "mpt, olmo, qwen2, refact, smaug-bpe, smollm, starcoder)");
}

void build_bpe(Pipeline& p, const Meta& md, const Vocabulary& v) {
    const GGUFValue* raw = get(md, "tokenizer.ggml.merges");
    if (!raw || raw->type != GGUFType::ARRAY || raw->elem_type != GGUFType::STRING)
        throw UnsupportedError("byte-level BPE tokenizer without tokenizer.ggml.merges");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(raw->strings.size());
    for (const std::string& m : raw->strings) {
        size_t sp = m.find(' ');
        if (sp == std::string::npos) throw UnsupportedError("malformed BPE merge '" + m + "'");
        merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
    std::string pre = "default";
    if (const GGUFValue* pv = get(md, "tokenizer.ggml.pre"); pv && pv->type == GGUFType::STRING) pre = pv->s;
    BpeOptions opt;
    // Llama 3 takes a pre-token that is itself in the vocabulary as is (llama.cpp's ignore_merges;
    // not set for gpt-4o, whose pre-tokens all go through the merges)
    opt.ignore_merges = pre == "llama-bpe" || pre == "llama3" || pre == "dbrx" || pre == "smaug-bpe";
    std::vector<std::string> regexes = pre_regexes(pre);
    p.model = make_bpe(last_id_vocab(v.tokens), merges, opt);
    std::vector<PreTokenizerPtr> steps;
    for (auto& r : regexes) steps.push_back(make_regex_split(known_regex(r), SplitBehavior::Isolated, false));
    steps.push_back(make_byte_level_pre_tokenizer(false, false));
    p.pre_tokenizer = make_sequence_pre_tokenizer(steps);
    p.decoder = make_byte_level_decoder();
}

void build_wordpiece(Pipeline& p, const Meta& md, const Vocabulary& v) {
    std::unordered_map<std::string, int32_t> vocab;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        const std::string& t = v.tokens[i];
        std::string piece;
        if (v.types[i] == CONTROL || (!t.empty() && t.front() == '[' && t.back() == ']')) piece = t;
        else if (t.compare(0, kMeta.size(), kMeta) == 0) piece = t.substr(kMeta.size());
        else piece = "##" + t;
        vocab.emplace(piece, int32_t(i));  // the first spelling wins (setdefault)
    }
    auto unk_id = md.count("tokenizer.ggml.unknown_token_id") ? get_int(md, "tokenizer.ggml.unknown_token_id")
                                                               : std::optional<int64_t>(100);
    std::string unk = valid_id(v.tokens, unk_id) ? piece_of(v.tokens, unk_id) : "[UNK]";
    p.model = make_wordpiece(std::move(vocab), unk, "##", 100);
    p.normalizer = make_bert_normalizer(true, true, true, true);
    p.pre_tokenizer = make_bert_pre_tokenizer();
    auto cls = md.count("tokenizer.ggml.cls_token_id") ? get_int(md, "tokenizer.ggml.cls_token_id")
                                                        : get_int(md, "tokenizer.ggml.bos_token_id");
    auto sep = md.count("tokenizer.ggml.seperator_token_id") ? get_int(md, "tokenizer.ggml.seperator_token_id")
                                                              : get_int(md, "tokenizer.ggml.eos_token_id");
    if (valid_id(v.tokens, cls) && valid_id(v.tokens, sep)) {
        p.post.present = true;
        p.post.before = {int32_t(*cls)};
        p.post.after = {int32_t(*sep)};
    }
    p.decoder = make_wordpiece_decoder("##", true);
}

}  // namespace

std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const Meta& md) {
    const GGUFValue* kind = get(md, "tokenizer.ggml.model");
    if (!kind || !get(md, "tokenizer.ggml.tokens"))
        throw UnsupportedError("the model file has no tokenizer (tokenizer.ggml.model / tokens missing)");
    Vocabulary v;
    v.kind = kind->type == GGUFType::STRING ? kind->s : std::string();
    v.tokens = string_array(md, "tokenizer.ggml.tokens");
    const size_t n = v.tokens.size();
    for (const std::string& t : v.tokens)
        if (!unicode::valid_utf8(t)) throw FormatError("tokenizer.ggml.tokens holds a token that is not UTF-8");
    v.types.assign(n, NORMAL);
    if (const GGUFValue* tv = get(md, "tokenizer.ggml.token_type"); tv && truthy(*tv)) {
        if (tv->ints.size() != n)
            throw UnsupportedError("tokenizer.ggml.token_type length does not match the vocabulary");
        for (size_t i = 0; i < n; ++i) v.types[i] = int32_t(tv->ints[i]);
    }
    auto bos = get_int(md, "tokenizer.ggml.bos_token_id");
    auto eos = get_int(md, "tokenizer.ggml.eos_token_id");
    v.bos = bos ? int32_t(*bos) : -1;
    v.eos = eos ? int32_t(*eos) : -1;
    v.add_bos = get_bool(md, "tokenizer.ggml.add_bos_token", v.kind == "llama");
    v.own_bos = v.kind != "bert";
    Pipeline p;
    if (v.kind == "llama") build_spm(p, md, v);
    else if (v.kind == "gpt2") build_bpe(p, md, v);
    else if (v.kind == "bert") {
        build_wordpiece(p, md, v);
        v.add_bos = false;  // [CLS] ... [SEP] come from the post-processor
    } else
        throw UnsupportedError("tokenizer model '" + v.kind + "' is not supported (expected 'llama', 'gpt2' or 'bert')");
    // control tokens are matched on the raw text; user-defined ones on the normalized text (raw for gpt2)
    std::vector<AddedToken> added;
    for (size_t i = 0; i < n; ++i) {
        if (v.types[i] == CONTROL || (v.types[i] == USER_DEFINED && v.kind == "gpt2"))
            added.push_back({v.tokens[i], false, false, false, false, v.types[i] == CONTROL});
        else if (v.types[i] == USER_DEFINED)
            added.push_back({v.tokens[i], false, false, false, true, false});
    }
    if (!added.empty()) p.added.add_tokens(added, *p.model, p.normalizer.get());
    return std::make_shared<TextTokenizer>(std::move(p), std::move(v));
}

}  // namespace akunu::text::tok
