"""Replays the fuzzing corpus (fuzz/corpus: seeds and every past finding)
through the parser and loader: each file loads or fails with a clear error."""

import glob
import os

import pytest

import akunu
from akunu import _core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = sorted(glob.glob(os.path.join(ROOT, "fuzz", "corpus", "*")))


@pytest.mark.parametrize("path", CORPUS, ids=[os.path.basename(p) for p in CORPUS])
def test_corpus_file_is_handled(path):
    try:
        _core.read_gguf(path)
    except akunu.AkunuError:
        return
    try:
        akunu.load(path, n_ctx=16)
    except akunu.AkunuError:
        pass


def test_corpus_has_seeds_and_findings():
    names = [os.path.basename(p) for p in CORPUS]
    assert any(n.startswith("seed-") for n in names) and len(names) >= 4


ST_CORPUS = sorted(glob.glob(os.path.join(ROOT, "fuzz", "corpus_safetensors", "*")))


@pytest.mark.parametrize("path", ST_CORPUS, ids=[os.path.basename(p) for p in ST_CORPUS])
def test_safetensors_corpus_file_is_handled(path, tmp_path):
    """Each safetensors fuzzing seed / finding, as a model directory's weights, loads or fails clearly."""
    import json
    import shutil

    shutil.copy(path, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "vocab_size": 4, "quantization": {"group_size": 32, "bits": 4}}))
    try:
        _core.read_model(str(tmp_path))
    except akunu.AkunuError:
        pass


CT2_CORPUS = sorted(glob.glob(os.path.join(ROOT, "fuzz", "corpus_ct2", "*")))


@pytest.mark.parametrize("path", CT2_CORPUS, ids=[os.path.basename(p) for p in CT2_CORPUS])
def test_ctranslate2_corpus_file_is_handled(path, tmp_path):
    """Each CTranslate2 model.bin fuzzing seed / finding, in a directory, loads or fails clearly."""
    import shutil

    shutil.copy(path, tmp_path / "model.bin")
    (tmp_path / "config.json").write_text('{"suppress_ids": [1, 2]}')
    with pytest.raises(akunu.AkunuError):  # every seed is truncated or corrupt
        akunu.load(str(tmp_path))
