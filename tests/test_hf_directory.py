"""Hugging Face / MLX model directories: random-weight models written by
transformers (CPU) give transformers' greedy tokens and logits through akunu;
MLX-quantized copies (tests/fixtures/hf_models.py's numpy quantizer) agree with
transformers running the dequantized weights; sharded directories load; and
corrupt or inconsistent directories are clear errors."""

import json
import os
import shutil
import struct

import numpy as np
import pytest

import akunu
from akunu import _core
from tests.fixtures.hf_models import make_decoder, mlx_quantize, mlx_dequantize, mlx_quantize_dir

torch = pytest.importorskip("torch")

PROMPT = [3, 17, 42, 99, 7, 123, 5, 250, 64, 1]
N_NEW = 24


def transformers_greedy(model, prompt, n):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=0)
    return out[0, len(prompt):].tolist()


def transformers_logits(model, tokens):
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].double().numpy()


def akunu_greedy(m, prompt, n):
    core = m._core()
    core.truncate(0)
    first = core.prefill(prompt)
    return [first] + list(core.decode_greedy(first, n - 1, []))


def rel_err(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def decoders(tmp_path_factory):
    made = {}

    def get(arch):
        if arch not in made:
            d = str(tmp_path_factory.mktemp(arch))
            made[arch] = (d, make_decoder(arch, d, seed=len(made) + 1))
        return made[arch]

    return get


@pytest.mark.parametrize("arch", ["llama", "llama3", "qwen2", "qwen3", "gemma", "gemma3"])
def test_greedy_tokens_equal_transformers(decoders, arch):
    d, ref_model = decoders(arch)
    m = akunu.load(d)
    assert m.format == "safetensors" and m.config["architecture"] == arch.replace("llama3", "llama")
    want = transformers_greedy(ref_model, PROMPT, N_NEW)
    got = akunu_greedy(m, PROMPT, N_NEW)
    assert got == want
    seq = PROMPT + want
    assert rel_err(m.logits(seq), transformers_logits(ref_model, seq)) < 5e-3


@pytest.mark.parametrize("bits,group", [(4, 64), (8, 64), (4, 32), (3, 32), (6, 64), (2, 32), (5, 64)])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_mlx_quantized_matches_dequantized_reference(decoders, tmp_path, arch, bits, group):
    import transformers as tf

    d, _ = decoders(arch)
    q_dir = str(tmp_path / "mlx")
    reference = mlx_quantize_dir(d, q_dir, bits, group)
    # the numpy reference of the quantized model: transformers with the dequantized weights
    ref_model = tf.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in reference.items()}
    missing = ref_model.load_state_dict(state, strict=False)
    assert not [k for k in missing.unexpected_keys]
    m = akunu.load(q_dir)
    dtypes = {t["name"]: t["dtype"] for t in m._core().tensors}
    assert dtypes["blk.0.attn_q.weight"] == f"MLX_Q{bits}_G{group}"
    assert dtypes["token_embd.weight"] == f"MLX_Q{bits}_G{group}"  # quantized embedding lookup too
    want = transformers_greedy(ref_model, PROMPT, N_NEW)
    seq = PROMPT + want
    assert rel_err(m.logits(seq), transformers_logits(ref_model, seq)) < 5e-3
    assert akunu_greedy(m, PROMPT, N_NEW) == want


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("group", [32, 64, 128])
def test_mlx_dequantize_matches_numpy(bits, group):
    rng = np.random.default_rng(bits * 1000 + group)
    w = rng.standard_normal((8, 256)).astype(np.float32)
    packed, s, b = mlx_quantize(w, bits, group)
    ref = mlx_dequantize(packed, s, b, bits, group)
    assert np.abs(ref - w).max() <= np.abs(s.astype(np.float32)).max() * 1.01  # within a step: a real quantization
    # the loader's repacked block: f32 scale, f32 bias, group * bits / 8 bytes of the bit stream
    gb = group * bits // 8
    blocks = bytearray()
    row_bytes = packed.view(np.uint8).reshape(8, -1)
    for r in range(8):
        for g in range(256 // group):
            blocks += struct.pack("<ff", float(s[r, g]), float(b[r, g])) + row_bytes[r, g * gb:(g + 1) * gb].tobytes()
    code = 1000 + bits * 10 + {32: 0, 64: 1, 128: 2}[group]
    got = _core.dequantize(bytes(blocks), code, 8 * 256).reshape(8, 256)
    np.testing.assert_array_equal(got, ref)


def test_sharded_directory_loads_like_one_file(decoders, tmp_path):
    from safetensors.numpy import load_file, save_file

    d, _ = decoders("qwen3")
    sharded = tmp_path / "sharded"
    shutil.copytree(d, sharded)
    os.remove(sharded / "model.safetensors")
    tensors = load_file(os.path.join(d, "model.safetensors"))
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for f, ns in halves.items():
        save_file({n: tensors[n] for n in ns}, str(sharded / f))
        weight_map.update({n: f for n in ns})
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    a, b = akunu.load(d), akunu.load(str(sharded))
    np.testing.assert_array_equal(a.logits(PROMPT), b.logits(PROMPT))
    # a missing shard is named
    os.remove(sharded / "model-00002-of-00002.safetensors")
    with pytest.raises(akunu.ModelFormatError, match="model-00002-of-00002.safetensors.*missing"):
        akunu.load(str(sharded))


# -- corrupt and inconsistent directories ---------------------------------------------------

def _header(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _write(path, header, data, header_len=None):
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h) if header_len is None else header_len) + h + data)


def _corrupt(decoders, tmp_path, edit):
    d, _ = decoders("llama")
    bad = tmp_path / "bad"
    shutil.copytree(d, bad)
    st = str(bad / "model.safetensors")
    header, data = _header(st)
    edit(bad, st, header, data)
    return str(bad)


def _first_tensor(header):
    return next(k for k in header if k != "__metadata__")


CORRUPTIONS = {
    "header length past the end": (lambda b, st, h, d: _write(st, h, d, header_len=1 << 40), "header length"),
    "header not JSON": (lambda b, st, h, d: open(st, "r+b").write(struct.pack("<Q", 20) + b"{not json at all..."),
                        "invalid JSON"),
    "truncated data": (lambda b, st, h, d: _write(st, h, d[: len(d) // 2]), "outside the data section"),
    "offset past the end": (lambda b, st, h, d: (h[_first_tensor(h)].update(data_offsets=[len(d) + 8, len(d) + 16]),
                                                 _write(st, h, d)), "outside the data section"),
    "overlapping tensors": (lambda b, st, h, d: (
        [h[k].update(data_offsets=[0, h[k]["data_offsets"][1] - h[k]["data_offsets"][0]])
         for k in sorted(k for k in h if k != "__metadata__")[:2]], _write(st, h, d)), "overlap|bytes but"),
    "size does not match shape": (lambda b, st, h, d: (h[_first_tensor(h)].update(shape=[3, 3]), _write(st, h, d)),
                                  "bytes but its shape"),
    "unknown dtype": (lambda b, st, h, d: (h[_first_tensor(h)].update(dtype="Q9"), _write(st, h, d)),
                      "unknown dtype"),
    "config hidden_size mismatch": (lambda b, st, h, d: _edit_config(b, hidden_size=96), "shape"),
    "config missing a key": (lambda b, st, h, d: _edit_config(b, num_hidden_layers=None), "num_hidden_layers"),
    "unsupported model_type": (lambda b, st, h, d: _edit_config(b, model_type="mamba"), "model_type 'mamba'"),
    "missing tensor": (lambda b, st, h, d: (h.pop("model.layers.1.mlp.up_proj.weight"), _write(st, h, d)),
                       "blk.1.ffn_up.weight"),
    "no config.json": (lambda b, st, h, d: os.remove(os.path.join(b, "config.json")), "config.json"),
    "no weights": (lambda b, st, h, d: os.remove(st), "model.safetensors"),
    "quantized without quantization config": (lambda b, st, h, d: _fake_quant(st, h, d), "quantization"),
}


def _edit_config(bad, **changes):
    p = os.path.join(bad, "config.json")
    cfg = json.load(open(p))
    for k, v in changes.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    json.dump(cfg, open(p, "w"))


def _fake_quant(st, h, d):
    name = "model.layers.0.mlp.up_proj"
    w = h.pop(name + ".weight")
    n = w["shape"][0]
    end = len(d)
    h[name + ".weight"] = {"dtype": "U32", "shape": [n, 8], "data_offsets": [end, end + n * 32]}
    h[name + ".scales"] = {"dtype": "F16", "shape": [n, 1], "data_offsets": [end + n * 32, end + n * 34]}
    h[name + ".biases"] = {"dtype": "F16", "shape": [n, 1], "data_offsets": [end + n * 34, end + n * 36]}
    _write(st, h, d + bytes(n * 36))


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_directory_is_a_clear_error(decoders, tmp_path, case):
    edit, message = CORRUPTIONS[case]
    bad = _corrupt(decoders, tmp_path, edit)
    with pytest.raises(akunu.AkunuError, match=message):
        akunu.load(bad)
