"""Record llama.cpp's token ids for the "gpt-4o" pre-tokenizer (OpenAI's o200k pattern, the
tokenizer.ggml.pre of gpt-oss GGUF files) in tests/golden/tokenizer-gpt-4o.json.

llama.cpp's own test vocabularies (ggml-vocab-*.gguf in the llama-cpp-python sdist) have no
gpt-4o one, so the vocabulary is llama.cpp's Llama 3 one (ggml-vocab-llama-bpe.gguf, a
byte-level BPE) with tokenizer.ggml.pre set to "gpt-4o". The cases are that vocabulary's
.inp texts and the texts below, which split differently under the o200k pattern than under
Llama 3's. tests/test_tokenizer_gpt4o.py rebuilds the same file (gpt4o_vocab) and checks the
Python and the C++ tokenizers against the recorded ids.

BPE's merges hide most of the pre-tokenizer's cuts in those ids, so each case of 2 to
PIECES_MAX_BYTES bytes also records llama.cpp's pre-tokens ("pieces"), read through a
vocabulary made for that text alone in which every substring of the text is a token and
merges with every other: each pre-token then comes out as one token.

Needs llama-cpp-python and gguf. Run from the repository root: python -m tools.make_tokenizer_golden
"""

from __future__ import annotations

import json
import os
import random
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GOLDEN = os.path.join(ROOT, "tests", "golden", "tokenizer-gpt-4o.json")
SOURCE = "ggml-vocab-llama-bpe.gguf"
SEPARATOR = "\n__ggml_vocab_test__\n"
PIECES_MAX_BYTES = 128
RANDOM_CASES, RANDOM_SEED = 60, 20

# Where the o200k pattern and Llama 3's part ways: lower-to-upper case changes inside words,
# contractions kept on the word before them (any case), digits in threes, "/" and newlines
# taken by the punctuation before them; and where llama.cpp's rewrite of the pattern (see
# akunu/tokenizer.py, _GPT4O) matters: letters outside ASCII, combining marks, contractions
# with a letter that folds to s only outside ASCII (long s).
EXTRA = [
    "HelloWorld CamelCaseWord getHTTPResponse XMLHttpRequest iPhone eBay McDonald's",
    "JSONParser.parseHTTPHeaders(\"Content-Type\") fooBarBaz_quxQUUX ABCdef abcDEF aBcDeF",
    "DON'T I'M WE'LL THEY'RE SHE'D YOU'VE IT'S can't Won'T",
    "'S 'T 'LL 'RE 'VE 'M 'D 's 'Ll 'rE O'Neil's L'OR\u00c9AL d'Artagnan rock'n'roll",
    "IT'\u017f it'\u017f '\u017f HE'\u017f",
    "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 \u0663\u0664\u0665\u0666\u0667 1st 2ND 10x 0x1F",
    "a./b ../c !/ ?// x.\n/y <br/> http://example.com/path/ (a)/(b) */ /* // .\r\n/",
    "e\u0301 a\u0308 cafe\u0301 nai\u0308ve Ame\u0301lie\u0301 x \u0301abc \u0301\u0301 e\u0301!! "
    "n\u0303 vs \u00f1",
    "\u00c9cole\u00c9t\u00e9 na\u00efve\u00c9tude a\u00c9b \u03a3\u03af\u03c3\u03c5\u03c6\u03bf\u03c2\u039a\u03b1\u03b9 "
    "\u041c\u043e\u0441\u043a\u0432\u0430\u041f\u0438\u0442\u0435\u0440 stra\u00dfeSTRASSE \u01c5ungla \u01c4UNGLA",
    "line1\nline2\r\n\n  line3 \n\n\tindented\n\n\nend.\n\n",
    "a\r\rb x \n y   \n\n \n  \t\n",
    "\u02b0\u02b2 \u0149 \u4e2d\u6587Abc \u65e5\u672c\u8a9eABC \u0915\u093f\u0924\u093e\u092c "
    "\u0e44\u0e21\u0e48\u0e44\u0e14\u0e49",
    "def fooBar(self):\n    return self.__bazQux__  # TODO: fixMe\n\n\nclass HTTPServer:\n\tpass\n",
]

# What random texts are drawn from (RANDOM_CASES of them here, more in the tests): where the
# two forms of the pattern and the letter classes part, that is case in and out of ASCII
# (upper, lower, title, modifier, other letters), marks of the three kinds, contractions in
# any case (long s, Kelvin sign), digits of several scripts, every kind of whitespace, "/".
POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"()-_/\\<>[]{}|@#$%^&*+=~`")
        + list(" \t\n\r\u00a0\u3000\u2028\x0b\x85\x1c") * 3
        + list("\u00c9\u00e9\u00c0\u00e0\u00df\u1e9e\u0130\u0131\u017f\u212a\u01c4\u01c5\u01c6\u1f88\u03a3\u03c3\u03c2"
               "\u0416\u0436\u02b0\u02bc\u3005\u65e5\u672c\u4e2d\uac00\u05d0\u0627\u0301\u0308\u0323\u0903\u20dd"
               "\u093f\u0e48\u200d\u00ad\ufffd\x00\x7f\u216b\u00bd\u00b2\u0663\uff10\U0001d400\U0001d41a")
        + ["\U0001f970", "\U0001f44d\U0001f3fd", "'s", "'S", "'ll", "'LL", "'Re", "'\u017f", "'\u212a", "e\u0301",
           "  ", "\n\n", "\r\n", " \n", "123456", "./", "//", "Camel", "HTTP", "iPhone", "DON'T", "\u00c9t\u00e9"])


def random_texts(n: int, seed: int) -> list:
    """n texts of 0 to 40 draws from POOL."""
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def gpt4o_vocab(src: str, dst: str) -> str:
    """The GGUF vocabulary src, written to dst with tokenizer.ggml.pre = "gpt-4o"."""
    import gguf

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = "gpt-4o" if name == "tokenizer.ggml.pre" else field.contents()
        w.add_key_value(name, value, field.types[0], sub_type=field.types[-1] if len(field.types) > 1 else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def piece_vocab(text: str, path: str) -> str:
    """A gpt-4o byte-level BPE vocabulary in which each pre-token of `text` merges into one
    token: every substring of the text (in byte-level characters) is a token, and every two
    adjacent substrings merge, so BPE stops only at the pre-tokenizer's cuts."""
    import gguf

    from akunu.tokenizer import _bytes_to_unicode  # GPT-2's byte-level alphabet

    b2u = _bytes_to_unicode()
    mapped = "".join(b2u[b] for b in text.encode("utf-8"))
    subs = {mapped[i:j] for i in range(len(mapped)) for j in range(i + 2, len(mapped) + 1)}
    tokens = sorted(set(b2u.values())) + sorted(subs)
    merges = sorted({f"{w[:k]} {w[k:]}" for w in subs for k in range(1, len(w))}, key=lambda m: (len(m), m))
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(8)
    w.add_head_count(1)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def llama_pieces(text: str, tmp: str) -> list:
    """llama.cpp's pre-tokens of text (gpt-4o)."""
    import llama_cpp

    llm = llama_cpp.Llama(piece_vocab(text, os.path.join(tmp, "pieces.gguf")), vocab_only=True, verbose=False)
    pieces = [llm.detokenize([i]).decode("utf-8") for i in llm.tokenize(text.encode("utf-8"), add_bos=False,
                                                                          special=False)]
    del llm
    assert "".join(pieces) == text
    return pieces


def cases(vocab_dir: str) -> list:
    with open(os.path.join(vocab_dir, SOURCE + ".inp"), encoding="utf-8") as f:
        return f.read().split(SEPARATOR) + EXTRA + random_texts(RANDOM_CASES, RANDOM_SEED)


def main() -> None:
    import llama_cpp

    from tests.fixtures.vocab_cases import SDIST, fetch

    vocab_dir = fetch()
    with tempfile.TemporaryDirectory() as tmp:
        path = gpt4o_vocab(os.path.join(vocab_dir, SOURCE), os.path.join(tmp, "ggml-vocab-gpt-4o.gguf"))
        llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
        records = [{"text": t, "ids": llm.tokenize(t.encode("utf-8"), add_bos=False, special=False)}
                   for t in cases(vocab_dir)]
        for r in records:
            if 2 <= len(r["text"].encode("utf-8")) <= PIECES_MAX_BYTES:  # one byte is one piece
                r["pieces"] = llama_pieces(r["text"], tmp)
    head = {"vocabulary": f"{SOURCE} of {SDIST} with tokenizer.ggml.pre = gpt-4o",
            "llama_cpp_python": llama_cpp.__version__}
    # one case a line; texts with \u escapes, so that marks and odd spaces show
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    body = ",\n".join("  " + json.dumps(r) for r in records)
    with open(GOLDEN, "w", encoding="ascii") as f:
        f.write("{\n" + "\n".join(lines) + '\n "cases": [\n' + body + "\n ]\n}\n")
    print(f"wrote {GOLDEN}: {len(records)} cases")


if __name__ == "__main__":
    main()
