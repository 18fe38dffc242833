"""The GGUF parser against files written by gguf-py: every value type, arrays,
alignment, versions, tensor table."""

import numpy as np
import pytest

from akunu import _core


def write(path, version_kv, alignment=None, tensors=()):
    import gguf

    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    for key, (val, vtype, sub) in version_kv.items():
        w.add_key_value(key, val, vtype, sub)
    for name, arr in tensors:
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_every_value_type(tmp_path):
    import gguf

    V = gguf.GGUFValueType
    kv = {
        "t.u8": (200, V.UINT8, None), "t.i8": (-100, V.INT8, None), "t.u16": (60000, V.UINT16, None),
        "t.i16": (-30000, V.INT16, None), "t.u32": (4000000000, V.UINT32, None),
        "t.i32": (-2000000000, V.INT32, None), "t.f32": (1.5, V.FLOAT32, None), "t.bool": (True, V.BOOL, None),
        "t.str": ("héllo ✓", V.STRING, None), "t.u64": (2**63 + 5, V.UINT64, None),
        "t.i64": (-(2**62), V.INT64, None), "t.f64": (2.25, V.FLOAT64, None),
        "t.arr_i32": ([1, -2, 3], V.ARRAY, V.INT32), "t.arr_f32": ([0.5, 1.5], V.ARRAY, V.FLOAT32),
        "t.arr_str": (["a", "", "ccc"], V.ARRAY, V.STRING),
    }
    path = str(tmp_path / "kv.gguf")
    write(path, kv)
    md = _core.read_gguf(path)["metadata"]
    for key, (val, _, _) in kv.items():
        assert md[key] == val, key
    assert md["general.architecture"] == "llama"


@pytest.mark.parametrize("alignment", [32, 64, 256])
def test_alignment_and_tensor_table(tmp_path, alignment):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 64)).astype(np.float32)
    b = rng.standard_normal((128,)).astype(np.float16)
    path = str(tmp_path / "t.gguf")
    write(path, {}, alignment if alignment != 32 else None, [("a", a), ("b", b)])
    info = _core.read_gguf(path)
    assert info["version"] == 3 and info["alignment"] == alignment
    t = {x["name"]: x for x in info["tensors"]}
    assert t["a"]["shape"] == [64, 3] and t["a"]["dtype"] == "F32" and t["a"]["n_bytes"] == 3 * 64 * 4
    assert t["b"]["shape"] == [128] and t["b"]["dtype"] == "F16"
    assert all(x["offset"] % alignment == 0 for x in info["tensors"])
    raw = open(path, "rb").read()
    data_start = info["file_size"] - (len(raw) - raw.index(a.tobytes()))
    assert raw[data_start + t["a"]["offset"] : data_start + t["a"]["offset"] + a.nbytes] == a.tobytes()


def test_version_2_is_read(tmp_path):
    path = str(tmp_path / "v2.gguf")
    write(path, {})
    raw = bytearray(open(path, "rb").read())
    raw[4:8] = (2).to_bytes(4, "little")
    p2 = tmp_path / "v2b.gguf"
    p2.write_bytes(bytes(raw))
    assert _core.read_gguf(str(p2))["version"] == 2


def test_mxfp4_tensors_and_their_byte_counts(tmp_path):
    """MXFP4 (GGML type 39): 17 bytes a block of 32, rows a whole number of
    blocks; a truncated MXFP4 tensor and a row of 48 values are errors that name the tensor."""
    import gguf

    T = gguf.GGMLQuantizationType
    rng = np.random.default_rng(0)
    experts = gguf.quants.quantize(rng.standard_normal((4, 96, 2880)).astype(np.float32), T.MXFP4)
    path = str(tmp_path / "mx.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("blk.0.ffn_up_exps.weight", experts, raw_dtype=T.MXFP4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    t = _core.read_gguf(path)["tensors"][0]
    assert t["dtype"] == "MXFP4" and t["shape"] == [2880, 96, 4] and t["n_bytes"] == 4 * 96 * 90 * 17
    assert t["n_bytes"] == experts.nbytes
    raw = open(path, "rb").read()
    short = tmp_path / "short.gguf"
    short.write_bytes(raw[:-100])
    with pytest.raises(Exception, match="blk.0.ffn_up_exps.weight.*past the end"):
        _core.read_gguf(str(short))
    # a row of 48 values is not whole MXFP4 blocks: the shape field patched in place
    at = raw.index((2880).to_bytes(8, "little") + (96).to_bytes(8, "little"))
    bad = bytearray(raw)
    bad[at : at + 8] = (48).to_bytes(8, "little")
    (tmp_path / "bad.gguf").write_bytes(bytes(bad))
    with pytest.raises(Exception, match="row length 48 is not a multiple of the MXFP4 block size 32"):
        _core.read_gguf(str(tmp_path / "bad.gguf"))
