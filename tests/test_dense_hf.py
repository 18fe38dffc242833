"""Hugging Face directories of the dense families beyond the first five
(granite, olmo2, smollm3, phi3, gemma2; random weights saved by transformers) through akunu
against transformers: logits and greedy tokens; the config's own keys
honoured (Granite's multipliers, SmolLM3's no_rope_layers); layouts akunu
does not run are clear errors."""

import json
import os

import numpy as np
import pytest

import akunu

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.fixtures import dense_hf_models  # noqa: E402

PROMPT = [3, 17, 42, 99, 7, 123, 5, 250, 64, 1]
N_NEW = 24
# F16 KV cache and float32 sums in another order: logits within this of transformers'
LOGIT_TOL = 0.03
NEAR_TIE = 0.02


def check(d, model, arch):
    m = akunu.load(d, n_ctx=256)
    assert m.config["architecture"] == arch
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=N_NEW, min_new_tokens=N_NEW, do_sample=False,
                             pad_token_id=0)
    want = out[0, len(PROMPT):].tolist()
    seq = PROMPT + want
    ref = dense_hf_models.reference(model, seq)
    ours = m.logits(seq)
    err = np.abs(ours - ref).max(1)
    assert err.max() < LOGIT_TOL, f"{arch}: max |logit - transformers| {err.max():.4f} at {int(err.argmax())}"
    got = m.generate(PROMPT, max_tokens=N_NEW).tokens
    if got != want:  # parting only at a near-tie of transformers' logits (teacher forcing)
        j = next(i for i in range(N_NEW) if got[i] != want[i])
        row = ref[len(PROMPT) - 1 + j]
        assert row[want[j]] - row[got[j]] < NEAR_TIE, f"step {j}: akunu {got[j]}, transformers {want[j]}"
    return ours


@pytest.mark.parametrize("arch", dense_hf_models.ARCHS)
def test_logits_and_greedy_tokens_match_transformers(tmp_path, arch):
    d = str(tmp_path / arch)
    check(d, dense_hf_models.make(arch, d, seed=11), arch)


def test_smollm3_no_rope_layers_are_read(tmp_path):
    """The same weights with every layer rotating: transformers' other logits, and akunu's follow."""
    a, b = str(tmp_path / "listed"), str(tmp_path / "all")
    listed = check(a, dense_hf_models.make("smollm3", a, seed=12), "smollm3")
    every = check(b, dense_hf_models.make("smollm3", b, seed=12, no_rope_layers=[1, 1, 1]), "smollm3")
    assert np.abs(listed - every).max() > 10 * LOGIT_TOL


def test_granite_multipliers_are_read(tmp_path):
    """Other multipliers on the same weights: transformers' other logits, and akunu's follow."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    first = check(a, dense_hf_models.make("granite", a, seed=13), "granite")
    other = check(b, dense_hf_models.make("granite", b, seed=13, residual_multiplier=0.5, logits_scaling=4.0,
                                          attention_multiplier=0.2, embedding_multiplier=6.0), "granite")
    assert np.abs(first - other).max() > 10 * LOGIT_TOL


def edit_config(d, **changes):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg.update(changes)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def test_layouts_akunu_does_not_run_are_clear_errors(tmp_path):
    d = str(tmp_path / "granite")
    dense_hf_models.make("granite", d, seed=1)
    edit_config(d, attention_bias=True)
    with pytest.raises(akunu.AkunuError, match="attention_bias"):
        akunu.load(d)
    d = str(tmp_path / "smollm3")
    dense_hf_models.make("smollm3", d, seed=1)
    edit_config(d, no_rope_layers=[1, 0])
    with pytest.raises(akunu.AkunuError, match="no_rope_layers"):
        akunu.load(d)
    edit_config(d, no_rope_layers=[1, 0, 1], use_sliding_window=True, sliding_window=8)
    with pytest.raises(akunu.AkunuError, match="use_sliding_window"):
        akunu.load(d)
    d = str(tmp_path / "phi3")
    dense_hf_models.make("phi3", d, seed=1)
    edit_config(d, partial_rotary_factor=0.75)
    with pytest.raises(akunu.AkunuError, match="partial_rotary_factor"):
        akunu.load(d)
