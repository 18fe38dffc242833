"""Whisper's tokenizer and special tokens.

The text tokenizer is the model's tokenizer.json (directories) or the copy a
GGUF stores under ``tokenizer.huggingface.json``. Special ids are looked up by
their strings; timestamp tokens (<|0.00|> ... <|30.00|>, 0.02 s apart) follow
<|notimestamps|> and are not in the tokenizer.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence

from tokenizers import Tokenizer

from ..errors import UnsupportedModelError

TIME_PRECISION = 0.02  # seconds per timestamp token

LANGUAGE_NAMES = {
    "en": "english", "zh": "chinese", "de": "german", "es": "spanish", "ru": "russian", "ko": "korean",
    "fr": "french", "ja": "japanese", "pt": "portuguese", "tr": "turkish", "pl": "polish", "ca": "catalan",
    "nl": "dutch", "ar": "arabic", "sv": "swedish", "it": "italian", "id": "indonesian", "hi": "hindi",
    "fi": "finnish", "vi": "vietnamese", "he": "hebrew", "uk": "ukrainian", "el": "greek", "ms": "malay",
    "cs": "czech", "ro": "romanian", "da": "danish", "hu": "hungarian", "ta": "tamil", "no": "norwegian",
    "th": "thai", "ur": "urdu", "hr": "croatian", "bg": "bulgarian", "lt": "lithuanian", "la": "latin",
}


class WhisperTokenizer:
    def __init__(self, tok: Tokenizer, vocab_size: int):
        self._tok = tok
        self.vocab_size = vocab_size

        def need(text: str) -> int:
            i = tok.token_to_id(text)
            if i is None:
                raise UnsupportedModelError(f"the Whisper tokenizer has no {text} token")
            return i

        self.eot = need("<|endoftext|>")
        self.sot = need("<|startoftranscript|>")
        self.transcribe = need("<|transcribe|>")
        self.translate = need("<|translate|>")
        self.no_timestamps = need("<|notimestamps|>")
        self.sot_prev = tok.token_to_id("<|startofprev|>")
        self.sot_lm = tok.token_to_id("<|startoflm|>")
        self.no_speech = tok.token_to_id("<|nospeech|>")
        if self.no_speech is None:
            self.no_speech = tok.token_to_id("<|nocaptions|>")
        self.timestamp_begin = self.no_timestamps + 1
        if self.timestamp_begin >= vocab_size:
            raise UnsupportedModelError("the Whisper vocabulary has no timestamp tokens")
        # openai's rule: multilingual checkpoints have 51865+ tokens (English-only ones 51864)
        self.multilingual = vocab_size >= 51865
        self.languages: Dict[str, int] = {}
        for i in range(self.sot + 1, self.translate):
            m = re.fullmatch(r"<\|([a-z]{2,3}|haw|yue)\|>", tok.id_to_token(i) or "")
            if m:
                self.languages[m.group(1)] = i
        self.space = tok.encode(" ", add_special_tokens=False).ids

    @classmethod
    def from_directory(cls, directory: str, vocab_size: int) -> "WhisperTokenizer":
        path = os.path.join(directory, "tokenizer.json")
        if not os.path.exists(path):
            raise UnsupportedModelError(f"the Whisper model directory '{directory}' has no tokenizer.json")
        return cls._build(lambda: Tokenizer.from_file(path), vocab_size, path)

    @classmethod
    def from_json(cls, text: str, vocab_size: int) -> "WhisperTokenizer":
        return cls._build(lambda: Tokenizer.from_str(text), vocab_size, "the tokenizer stored in the model")

    @classmethod
    def _build(cls, load, vocab_size: int, what: str) -> "WhisperTokenizer":
        try:
            return cls(load(), vocab_size)
        except UnsupportedModelError:
            raise
        except Exception as e:  # malformed tokenizer.json
            raise UnsupportedModelError(f"cannot load {what}: {e}") from None

    def encode(self, text: str) -> List[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of the ids below the special tokens (timestamps and specials dropped)."""
        return self._tok.decode([i for i in ids if i < self.eot], skip_special_tokens=True)

    def language_token(self, language: str) -> int:
        if language not in self.languages:
            raise ValueError(f"unknown language '{language}' (this model knows {len(self.languages)}: "
                             f"{', '.join(sorted(self.languages)[:12])}, ...)")
        return self.languages[language]

    def sot_sequence(self, language: Optional[str], task: str, timestamps: bool) -> List[int]:
        seq = [self.sot]
        if self.multilingual:
            seq += [self.language_token(language or "en"), self.translate if task == "translate" else self.transcribe]
        if not timestamps:
            seq.append(self.no_timestamps)
        return seq

    def non_speech_tokens(self) -> List[int]:
        """Tokens of symbols and speaker tags that openai-whisper suppresses (its
        non_speech_tokens), for models whose files carry no suppression list."""
        symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
        symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
        miscellaneous = set("♩♪♫♬♭♮♯")
        result = set(self.encode(" -")[:1] + self.encode(" '")[:1])
        for symbol in symbols + list(miscellaneous):
            for tokens in (self.encode(symbol), self.encode(" " + symbol)):
                if len(tokens) == 1 or symbol in miscellaneous:
                    result.add(tokens[0])
        return sorted(result)
