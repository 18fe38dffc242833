"""The random-model writer's fast draw for benchmark files (float32 normals in
threaded row slabs): the same file for the same seed, values of the stated
spread in the stated type, and a model that loads and decodes."""

import numpy as np

import akunu
from tests.fixtures import random_gguf


def test_float32_normals_spread_type_and_seed():
    a = random_gguf.float32_normals(np.random.default_rng(3), (1000, 256), 0.05, np.float16)
    b = random_gguf.float32_normals(np.random.default_rng(3), (1000, 256), 0.05, np.float16)
    c = random_gguf.float32_normals(np.random.default_rng(4), (1000, 256), 0.05, np.float16)
    assert a.dtype == np.float16 and a.shape == (1000, 256)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert abs(float(a.astype(np.float64).std()) - 0.05) < 0.001 and abs(float(a.mean())) < 0.001
    # slabs come from distinct generators: two slabs of one generator would start with the same row
    assert len({row.tobytes() for row in a}) == len(a)


def test_fast_files_are_reproducible_and_run(tmp_path):
    shape = random_gguf.Shape(dim=128, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, ffn_dim=256, vocab=512)
    h1 = random_gguf.write_model(str(tmp_path / "a.gguf"), "llama", "F16", seed=1, shape=shape, fast_normals=True)
    h2 = random_gguf.write_model(str(tmp_path / "b.gguf"), "llama", "F16", seed=1, shape=shape, fast_normals=True)
    assert h1 == h2
    m = akunu.load(str(tmp_path / "a.gguf"))
    out = m.generate([1, 5, 9], max_tokens=4)
    assert len(out.tokens) == 4
    assert np.isfinite(m._core().logits([1, 5, 9])).all()
