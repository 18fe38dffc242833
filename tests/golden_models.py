"""Locating the random-weight models that tools/make_golden.py recorded llama.cpp's outputs for."""

import glob
import json
import os

import random_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
MODELS = os.path.join(ROOT, "tests", "models")


def records():
    out = []
    for p in sorted(glob.glob(os.path.join(GOLDEN, "random-*.json"))):
        with open(p) as f:
            out.append(json.load(f))
    return out


def model_path(rec, cache_dir):
    """The model file of a record: committed (quantized by llama.cpp) or rebuilt from its seed."""
    kind, what = rec["made_by"]
    if kind == "quant":
        path = os.path.join(MODELS, rec["name"] + ".gguf")
    else:
        path = os.path.join(cache_dir, rec["name"] + ".gguf")
        if not os.path.exists(path) or random_gguf.sha256_of(path) != rec["sha256"]:
            random_gguf.write_model(path, rec["arch"], what, seed=rec["seed"])
    sha = random_gguf.sha256_of(path)
    if sha != rec["sha256"]:
        raise AssertionError(
            f"{rec['name']}: model bytes differ from the ones llama.cpp was run on "
            f"({sha[:12]} != {rec['sha256'][:12]}); regenerate with tools/make_golden.py"
        )
    return path
