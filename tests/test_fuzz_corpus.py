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
