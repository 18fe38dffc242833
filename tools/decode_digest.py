"""Digests of CUDA decode outputs, for A/B switches that must not change a bit.

Prints, per model, a sha256 of the logits of a few decode steps (one
command at a time) and the greedy tokens of a generation (the step graph);
with --long also a ~300-token prompt in a 1024-position cache, so that the
decode attention runs several key splits. tools/cuda_check.sh runs it under
each setting of a pair and compares the outputs byte for byte.
  python -m tools.decode_digest [--long] [MODEL.gguf ...]   (from the repository root)
"""
import hashlib
import sys

import numpy as np

import akunu
from tests.fixtures import random_gguf

DEFAULT_MODELS = ("tests/models/llama-q4_k_m.gguf", "tests/models/llama-q4_0.gguf", "tests/models/qwen3-q8_0.gguf",
                  "tests/models/llama-q4_1.gguf", "/tmp/link_qwen3_f16.gguf", "tests/models/gemma3-q4_k_m.gguf")


def digest(path, n_ctx, prompt):
    m = akunu.load(path, device="cuda", n_ctx=n_ctx)
    core = m._core()
    core.prefill(m.tokenize(prompt))
    rows = [core.decode_logits(t) for t in (5, 17, 99, 3)]
    print(path, n_ctx, hashlib.sha256(np.concatenate(rows).tobytes()).hexdigest())
    print(m.generate(prompt, max_tokens=24).tokens, flush=True)


def main(argv):
    long = "--long" in argv
    paths = [a for a in argv if not a.startswith("--")] or DEFAULT_MODELS
    if "/tmp/link_qwen3_f16.gguf" in paths:  # float GEMVs behind a norm, with QK norm
        random_gguf.write_model("/tmp/link_qwen3_f16.gguf", "qwen3", "F16", seed=4)
    for path in paths:
        digest(path, 128, "hello world, the quick brown fox")
        if long:
            digest(path, 1024, "the quick brown fox jumps over the lazy dog " * 12)


if __name__ == "__main__":
    main(sys.argv[1:])
