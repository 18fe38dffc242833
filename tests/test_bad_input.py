"""Hostile and broken inputs give a clear akunu error, never a crash."""

import os
import struct

import numpy as np
import pytest

import akunu
from akunu import _core


def write(tmp_path, name, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def gguf_string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def header(n_tensors, n_kv, version=3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def test_missing_file():
    with pytest.raises(akunu.AkunuError, match="does not exist"):
        akunu.load("/nonexistent/model.gguf")
    with pytest.raises(akunu.AkunuError, match="cannot open"):
        _core.read_gguf("/nonexistent/model.gguf")


def test_not_a_gguf(tmp_path):
    with pytest.raises(akunu.ModelFormatError, match="bad magic"):
        akunu.load(write(tmp_path, "x.gguf", b"GGML" + b"\0" * 100))


def test_empty_file(tmp_path):
    with pytest.raises(akunu.ModelFormatError, match="empty"):
        akunu.load(write(tmp_path, "e.gguf", b""))


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(akunu.AkunuError, match="not a regular file"):
        _core.read_gguf(str(tmp_path))


@pytest.mark.parametrize("version", [0, 1, 4, 0xFFFFFFFF])
def test_unsupported_version(tmp_path, version):
    with pytest.raises(akunu.ModelFormatError, match="version"):
        _core.read_gguf(write(tmp_path, "v.gguf", header(0, 0, version)))


@pytest.mark.parametrize(
    "data,match",
    [
        (header(2**62, 0), "tensor count"),
        (header(0, 2**62), "metadata count"),
        (header(0, 1) + gguf_string(b"k") + struct.pack("<I", 8) + struct.pack("<Q", 2**63), "truncated"),
        (header(0, 1) + struct.pack("<Q", 2**64 - 1) + b"\0" * 16, "truncated"),
        (header(0, 1) + gguf_string(b"k") + struct.pack("<IIQ", 9, 4, 2**61), "array length"),
        (header(0, 1) + gguf_string(b"k") + struct.pack("<I", 99), "unknown type"),
        (header(0, 1) + gguf_string(b"k") + struct.pack("<IB", 7, 5), "bool"),
        (header(0, 1) + gguf_string(b"k") + struct.pack("<IIQ", 9, 9, 1) * 1 + struct.pack("<IQ", 9, 1) * 8,
         "nested"),
        (header(0, 2) + (gguf_string(b"k") + struct.pack("<II", 4, 1)) * 2, "twice"),
        (header(0, 1) + gguf_string(b"general.alignment") + struct.pack("<II", 4, 3), "power of two"),
    ],
    ids=["tensor-count", "kv-count", "string-2^63", "key-len-huge", "array-2^61", "bad-type", "bad-bool",
         "deep-nesting", "dup-key", "bad-alignment"],
)
def test_hostile_headers(tmp_path, data, match):
    with pytest.raises(akunu.ModelFormatError, match=match):
        _core.read_gguf(write(tmp_path, "h.gguf", data))


def tensor_info(name: bytes, shape, ggml_type, offset) -> bytes:
    out = gguf_string(name) + struct.pack("<I", len(shape))
    out += b"".join(struct.pack("<Q", s) for s in shape)
    return out + struct.pack("<IQ", ggml_type, offset)


@pytest.mark.parametrize(
    "info,match",
    [
        (tensor_info(b"t", [4, 4], 0, 2**60), "past the end"),
        (tensor_info(b"t", [2**39, 2**39], 0, 0), "overflows|past the end"),
        (tensor_info(b"t", [4, 4], 0, 3), "not aligned"),
        (tensor_info(b"t", [4, 4], 77, 0), "unknown GGML type"),
        (tensor_info(b"t", [33], 8, 0), "block size"),
        (tensor_info(b"t", [0], 0, 0), "dimension"),
        (gguf_string(b"t") + struct.pack("<I", 9), "dimensions"),
    ],
    ids=["offset-past-end", "size-overflow", "misaligned", "unknown-type", "partial-block", "zero-dim", "9-dims"],
)
def test_hostile_tensor_infos(tmp_path, info, match):
    data = header(1, 0) + info
    data += b"\0" * ((-len(data)) % 32) + b"\0" * 64
    with pytest.raises(akunu.ModelFormatError, match=match):
        _core.read_gguf(write(tmp_path, "t.gguf", data))


def test_truncated_everywhere(tmp_path, small_model):
    """Cut the file at many points: each cut either fails with a clear error."""
    data = open(small_model, "rb").read()
    cuts = sorted(set(list(range(0, 4096, 37)) + list(np.linspace(4096, len(data) - 1, 60).astype(int))))
    p = tmp_path / "cut.gguf"
    for n in cuts:
        p.write_bytes(data[:n])
        with pytest.raises(akunu.AkunuError):
            akunu.load(str(p))


def test_corrupted_bytes_never_crash(tmp_path, small_model):
    """Overwrite header bytes with random values: load succeeds or raises AkunuError."""
    data = bytearray(open(small_model, "rb").read())
    meta = _core.read_gguf(small_model)
    header_len = len(data) - sum(t["n_bytes"] for t in meta["tensors"])
    rng = np.random.default_rng(0)
    p = tmp_path / "mut.gguf"
    errors = 0
    for _ in range(300):
        d = bytearray(data)
        for pos in rng.integers(0, header_len, size=rng.integers(1, 4)):
            d[pos] = int(rng.integers(0, 256))
        p.write_bytes(bytes(d))
        try:
            m = akunu.load(str(p), n_ctx=32)
            m.generate([1, 5, 7], max_tokens=2)
        except akunu.AkunuError:
            errors += 1
    assert errors > 0


def test_unknown_architecture(tmp_path):
    import gguf

    path = str(tmp_path / "arch.gguf")
    w = gguf.GGUFWriter(path, "mamba9")
    w.add_tensor("token_embd.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(akunu.UnsupportedModelError, match="unsupported architecture 'mamba9'"):
        akunu.load(path)


def test_unsupported_dtype_names_tensor(tmp_path, small_model):
    """Re-type one F16 matrix as I16 (same size, a GGML type with no weight kernels)."""
    data = bytearray(open(small_model, "rb").read())
    name = b"blk.0.ffn_up.weight"
    i = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    n_dims = struct.unpack_from("<I", data, i)[0]
    type_at = i + 4 + 8 * n_dims
    assert struct.unpack_from("<I", data, type_at)[0] == 1  # F16
    struct.pack_into("<I", data, type_at, 25)  # I16
    with pytest.raises(akunu.UnsupportedModelError, match="blk.0.ffn_up.weight.*I16"):
        akunu.load(write(tmp_path, "i16.gguf", bytes(data)))


def test_inconsistent_shapes(tmp_path, small_model):
    """embedding_length that disagrees with the tensors."""
    data = open(small_model, "rb").read()
    key = b"llama.embedding_length"
    i = data.index(key) + len(key)
    typ, val = struct.unpack_from("<II", data, i)
    bad = data[: i + 4] + struct.pack("<I", val * 2) + data[i + 8 :]
    with pytest.raises(akunu.ModelFormatError, match="embedding_length|shape"):
        akunu.load(write(tmp_path, "shape.gguf", bad))


def test_prompt_longer_than_context(small_model):
    m = akunu.load(small_model, n_ctx=16)
    with pytest.raises(akunu.AkunuError, match="does not fit"):
        m.generate(list(range(3, 40)), max_tokens=4)
    with pytest.raises(akunu.AkunuError, match="context overflow"):
        m.logits(list(range(3, 40)))


def test_bad_arguments(small_model):
    m = akunu.load(small_model, n_ctx=64)
    with pytest.raises(akunu.AkunuError, match="outside the vocabulary"):
        m.logits([1, 99999])
    with pytest.raises(akunu.AkunuError, match="temperature"):
        m.generate("hi", temperature=-1)
    with pytest.raises(akunu.AkunuError, match="top_p"):
        m.generate("hi", top_p=0)
    with pytest.raises(akunu.AkunuError, match="unknown device"):
        akunu.load(small_model, device="tpu")
    with pytest.raises(akunu.AkunuError, match="not available"):
        akunu.load(small_model, device="cuda")


def test_bad_load_and_generate_arguments(small_model):
    with pytest.raises(akunu.AkunuError, match="n_ctx must be a positive integer"):
        akunu.load(small_model, n_ctx=0)
    m = akunu.load(small_model, n_ctx=32)
    with pytest.raises(akunu.AkunuError, match="max_tokens"):
        m.generate("hi", max_tokens=-1)
    with pytest.raises(akunu.AkunuError, match="empty"):
        m.generate([], max_tokens=2)
    with pytest.raises(akunu.AkunuError, match="at least one token"):
        m.logits([])
    with pytest.raises(akunu.AkunuError, match="perplexity needs"):
        akunu.perplexity(m, [1, 2, 3], n_ctx=16)


def test_dequantize_rejects_short_or_unsupported_data():
    with pytest.raises(akunu.AkunuError, match="too short"):
        _core.dequantize(b"\0" * 10, 8, 64)  # two Q8_0 blocks need 68 bytes
    with pytest.raises(akunu.UnsupportedModelError, match="I16"):
        _core.dequantize(b"\0" * 64, 25, 32)


def test_cli_reports_errors_without_traceback(tmp_path):
    import subprocess
    import sys

    for args, match in [(["/nonexistent/model.gguf", "-p", "hi"], "does not exist"),
                        (["not-a-named-model", "-p", "hi"], "named models"),
                        ([str(write(tmp_path, "bad.gguf", b"GGML" + b"\0" * 64)), "-p", "hi"], "bad magic")]:
        r = subprocess.run([sys.executable, "-m", "akunu.cli.generate", *args], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 1, r.stderr
        assert "akunu-generate: error:" in r.stderr and match in r.stderr
        assert "Traceback" not in r.stderr


def test_overlapping_tensors(tmp_path):
    data = header(2, 0) + tensor_info(b"a", [16], 0, 0) + tensor_info(b"b", [16], 0, 32)
    data += b"\0" * ((-len(data)) % 32) + b"\0" * 128
    with pytest.raises(akunu.ModelFormatError, match="overlap"):
        _core.read_gguf(write(tmp_path, "o.gguf", data))
    ok = header(2, 0) + tensor_info(b"a", [16], 0, 0) + tensor_info(b"b", [16], 0, 64)
    ok += b"\0" * ((-len(ok)) % 32) + b"\0" * 128
    assert len(_core.read_gguf(write(tmp_path, "ok.gguf", ok))["tensors"]) == 2


def test_context_larger_than_memory_is_refused_before_allocating(tmp_path):
    from tests.fixtures import random_gguf

    path = str(tmp_path / "wide.gguf")
    # 4 layers x 4096-wide K/V: a 2^20-token cache would need 64 GiB
    random_gguf.write_model(path, "llama", "F16", seed=1, shape=random_gguf.Shape(
        dim=64, n_layers=4, n_heads=4, n_kv_heads=4, head_dim=1024, ffn_dim=64, vocab=64, ctx=1 << 20))
    with pytest.raises(akunu.AkunuError, match="smaller n_ctx"):
        akunu.load(path, n_ctx=1 << 20)
    assert akunu.load(path, n_ctx=64).generate([1, 2], max_tokens=2).tokens
