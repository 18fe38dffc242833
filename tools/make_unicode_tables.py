"""Writes src/text/tokenizer/unicode_tables.cpp, the Unicode data of the C++ tokenizer.

The tokenizer must give Hugging Face `tokenizers`' ids exactly, and that library's Rust crates carry their
own Unicode data, of several versions: Oniguruma's for the pre-tokenizer regexes (\\p{L}, \\p{N}, \\s),
Rust std's for is_whitespace / is_numeric / to_lowercase, unicode_categories' for BERT's control and
punctuation tests, unicode-normalization-alignments' for NFD. Python's `unicodedata` is the base of every
table, and each property the library decides is then read from the installed `tokenizers` itself by
running its normalizers and pre-tokenizers over every code point; the script prints how many code points
each probe moved away from `unicodedata`. Canonical combining classes and NFC's composition pairs, which
cannot be probed this way, come from `unicodedata` alone.

Usage (from the repository root): python tools/make_unicode_tables.py
"""

from __future__ import annotations

import os
import sys
import unicodedata

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src", "text", "tokenizer",
                   "unicode_tables.cpp")
SEP = "|"  # unchanged by every probe below; probed on its own
CPS = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
PROBED = [c for c in CPS if chr(c) != SEP]
TEXT = SEP.join(chr(c) for c in PROBED)

# flag bits, as src/text/tokenizer/unicode.h names them
FLAGS = ["LETTER", "NUMBER", "SPACE", "WHITESPACE", "BERT_CONTROL", "BERT_PUNCT", "NUMERIC", "NONSPACING_MARK",
         "MARK", "WORD", "UPPER_OR_CASELESS", "LOWER_OR_CASELESS"]
BIT = {name: 1 << i for i, name in enumerate(FLAGS)}


def per_char(normalizer) -> dict:
    """What `normalizer` makes of each code point on its own."""
    out = normalizer.normalize_str(TEXT).split(SEP)
    assert len(out) == len(PROBED), "a probe changed the separator"
    res = dict(zip(PROBED, out))
    res[ord(SEP)] = normalizer.normalize_str(SEP)
    return res


def regex_members(pattern: str) -> set:
    """Code points the one-character class `pattern` matches (Oniguruma, as `tokenizers` runs it)."""
    gaps = pre_tokenizers.Split(Regex(pattern), behavior="removed").pre_tokenize_str("".join(chr(c) for c in CPS))
    unmatched = set()
    for piece, _ in gaps:
        unmatched.update(ord(ch) for ch in piece)
    return set(CPS) - unmatched


def removed_by(pre_tokenizer) -> set:
    """Code points a pre-tokenizer drops (whitespace splitters), between 'x's."""
    pieces = pre_tokenizer.pre_tokenize_str("x".join(chr(c) for c in CPS if c != ord("x")))
    kept = set()
    for piece, _ in pieces:
        kept.update(ord(ch) for ch in piece)
    return set(CPS) - kept - {ord("x")}


def isolated_by(pre_tokenizer) -> set:
    """Code points a pre-tokenizer puts in pieces of their own (punctuation, digits), between 'x's."""
    pieces = pre_tokenizer.pre_tokenize_str("x".join(chr(c) for c in CPS if c != ord("x")))
    return {ord(p) for p, _ in pieces if len(p) == 1 and p != "x"}


def category_set(prefixes) -> set:
    return {c for c in CPS if unicodedata.category(chr(c)).startswith(prefixes)}


def report(name: str, probed: set, base: set) -> None:
    print(f"{name}: {len(probed)} code points, {len(probed ^ base)} differ from unicodedata", file=sys.stderr)


def word_chars() -> set:
    """Rust regex's \\w (added tokens' single_word test): an added token 'Z' that must stand alone is
    found after a code point exactly when that code point is not \\w."""
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.add_tokens([AddedToken("Z", single_word=True)])
    zid = tok.token_to_id("Z")
    encs = tok.encode_batch([chr(c) + "Z" for c in CPS], add_special_tokens=False)
    return {c for c, e in zip(CPS, encs) if zid not in e.ids}


def main() -> None:
    flags = {c: 0 for c in CPS}

    def add(name, members):
        for c in members:
            flags[c] |= BIT[name]

    letter = regex_members(r"\p{L}")
    report("\\p{L}", letter, category_set("L"))
    number = regex_members(r"\p{N}")
    report("\\p{N}", number, category_set("N"))
    space = regex_members(r"\s")
    report("\\s", space, {c for c in CPS if chr(c).isspace()})
    white = removed_by(pre_tokenizers.WhitespaceSplit())
    report("is_whitespace", white, {c for c in CPS if chr(c).isspace()})
    clean = per_char(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                                                lowercase=False))
    control = {c for c, s in clean.items() if s == ""}
    report("BERT control", control, category_set(("Cc", "Cf", "Co")) - {9, 10, 13} | {0, 0xFFFD})
    bert_ws = {c for c, s in clean.items() if s == " " and c != 0x20}
    # clean_text drops controls first, then turns the remaining whitespace into spaces
    assert bert_ws | {0x20} == (white | {9, 10, 13}) - control, "BERT's whitespace is not is_whitespace"
    punct = isolated_by(pre_tokenizers.BertPreTokenizer())
    report("BERT punctuation", punct, category_set("P") | {c for c in range(128) if chr(c) in
                                                          "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"})
    numeric = isolated_by(pre_tokenizers.Digits(individual_digits=True))
    report("is_numeric", numeric, category_set("N"))
    nfd = per_char(normalizers.NFD())
    strip = per_char(normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                                lowercase=False))
    nonspacing = {c for c in CPS if nfd[c] == chr(c) and strip[c] == ""}
    report("nonspacing marks", nonspacing, {c for c in category_set("Mn") if unicodedata.normalize("NFD", chr(c)) == chr(c)})
    marks = {c for c, s in per_char(normalizers.StripAccents()).items() if s == ""}
    report("combining marks", marks, category_set("M"))
    word = word_chars()
    report("\\w", word, category_set(("L", "M", "Nd", "Pc")))
    # the two letter classes of OpenAI's o200k pattern (gpt-4o, gpt-oss)
    upper_class = regex_members(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]")
    report("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", upper_class, category_set(("Lu", "Lt", "Lm", "Lo", "M")))
    lower_class = regex_members(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")
    report("[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]", lower_class, category_set(("Ll", "Lm", "Lo", "M")))
    for name, members in (("LETTER", letter), ("NUMBER", number), ("SPACE", space), ("WHITESPACE", white),
                          ("BERT_CONTROL", control), ("BERT_PUNCT", punct), ("NUMERIC", numeric),
                          ("NONSPACING_MARK", nonspacing), ("MARK", marks), ("WORD", word),
                          ("UPPER_OR_CASELESS", upper_class), ("LOWER_OR_CASELESS", lower_class)):
        add(name, members)

    ranges = []
    prev = None
    for c in range(0x110000):
        f = flags.get(c, 0)
        if f != prev:
            ranges.append((c, f))
            prev = f

    lower = per_char(normalizers.Lowercase())
    lower_map = {c: s for c, s in lower.items() if s != chr(c)}
    report("lowercase", set(lower_map), {c for c in CPS if chr(c).lower() != chr(c)})
    hangul = range(0xAC00, 0xAC00 + 11172)
    nfd_map = {c: s for c, s in nfd.items() if s != chr(c) and c not in hangul}
    report("NFD", set(nfd_map), {c for c in CPS if unicodedata.normalize("NFD", chr(c)) != chr(c)} - set(hangul))
    ccc = [(c, unicodedata.combining(chr(c))) for c in CPS if unicodedata.combining(chr(c))]
    # NFD's crate may be older than unicodedata: a mark it does not know is a starter there. A non-starter
    # moves before U+0334 (class 1) or after U+0301 (class 230) when NFD orders them.
    marks_nfd = normalizers.NFD()
    probes = SEP.join(chr(c) + "\u0334" + SEP + "\u0301" + chr(c) for c, _ in ccc).split(SEP)
    probed = marks_nfd.normalize_str(SEP.join(probes)).split(SEP)
    known = {c for i, (c, _) in enumerate(ccc) if probed[2 * i] != probes[2 * i] or probed[2 * i + 1] != probes[2 * i + 1]}
    report("non-starters", known, {c for c, _ in ccc})
    ccc = [(c, v) for c, v in ccc if c in known]
    compose = []
    for c in CPS:
        d = unicodedata.decomposition(chr(c))
        if not d or d.startswith("<") or c in hangul or c not in nfd_map:  # composites the crate knows
            continue
        parts = [int(x, 16) for x in d.split()]
        if len(parts) == 2 and unicodedata.normalize("NFC", unicodedata.normalize("NFD", chr(c))) == chr(c):
            compose.append((parts[0], parts[1], c))
    compose.sort()

    pool: list = []
    pool_index: dict = {}

    def pooled(s: str):
        key = s
        if key not in pool_index:
            pool_index[key] = len(pool)
            pool.extend(ord(ch) for ch in s)
        return pool_index[key], len(s)

    def code_map(m: dict):
        rows = []
        for c in sorted(m):
            off, n = pooled(m[c])
            rows.append(f"{{0x{c:06X}, {off}, {n}}}")
        return rows

    lower_rows = code_map(lower_map)
    nfd_rows = code_map(nfd_map)
    ccc_ranges = []
    for c, v in ccc:
        if ccc_ranges and ccc_ranges[-1][1] == c - 1 and ccc_ranges[-1][2] == v:
            ccc_ranges[-1][1] = c
        else:
            ccc_ranges.append([c, c, v])

    def block(rows, per_line=6):
        return "\n".join("    " + ", ".join(rows[i:i + per_line]) + "," for i in range(0, len(rows), per_line))

    with open(OUT, "w", encoding="utf-8") as f:
        f.write(f"""// Generated by tools/make_unicode_tables.py from tokenizers {tokenizers.__version__} and Python's
// unicodedata {unicodedata.unidata_version}; do not edit. Flag bits: src/text/tokenizer/unicode.h.
#include "text/tokenizer/unicode_tables.h"

namespace akunu::text::unicode {{

const FlagRange kFlagRanges[] = {{
{block([f"{{0x{c:06X}, 0x{v:03X}}}" for c, v in ranges])}
}};
const size_t kFlagRangeCount = sizeof(kFlagRanges) / sizeof(kFlagRanges[0]);

const char32_t kMapPool[] = {{
{block([f"0x{c:X}" for c in pool], 10)}
}};

const CodeMap kLowercase[] = {{
{block(lower_rows)}
}};
const size_t kLowercaseCount = sizeof(kLowercase) / sizeof(kLowercase[0]);

const CodeMap kDecomposition[] = {{
{block(nfd_rows)}
}};
const size_t kDecompositionCount = sizeof(kDecomposition) / sizeof(kDecomposition[0]);

const CombiningRange kCombiningClass[] = {{
{block([f"{{0x{a:06X}, 0x{b:06X}, {v}}}" for a, b, v in ccc_ranges], 4)}
}};
const size_t kCombiningClassCount = sizeof(kCombiningClass) / sizeof(kCombiningClass[0]);

const Composition kCompositions[] = {{
{block([f"{{0x{a:06X}, 0x{b:06X}, 0x{c:06X}}}" for a, b, c in compose], 3)}
}};
const size_t kCompositionCount = sizeof(kCompositions) / sizeof(kCompositions[0]);

}}  // namespace akunu::text::unicode
""")
    print(f"wrote {OUT}: {len(ranges)} flag ranges, {len(lower_rows)} lowercase, {len(nfd_rows)} decompositions, "
          f"{len(ccc_ranges)} combining-class ranges, {len(compose)} compositions", file=sys.stderr)


if __name__ == "__main__":
    main()
