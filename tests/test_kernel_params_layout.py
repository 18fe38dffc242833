"""The kernel parameter structs have one definition, src/core/kernel_params.h.

akunu._testing.param_layouts() exports sizeof / offsetof of every field as the
compiler lays them out (the list of structs and fields is read from the header
at build time by src/python/param_layouts.py); the tests' packers
(tests/fixtures/kernel_params.py) pack by that table. Checked here:
- the table covers the header as this test reads it on its own: every struct,
  every field, in declaration order,
  with the declared type and array length (read from the header's text), and no
  padding (the header promises plain 4-byte fields, the same in C++, CUDA and
  Metal);
- every struct has a packer (or is listed in NOT_PACKED with the reason), and
  each packer writes a struct of the right size whose fields hold the values
  given for them: distinct sentinels for every argument, read back at the C++
  offsets;
- the MultiGemvMode values the tests use are the header's."""

import inspect
import os
import re
import struct

import pytest

from akunu import _testing
from tests.fixtures import kernel_params as kp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "src", "core", "kernel_params.h")
LAYOUTS = _testing.param_layouts()

# Structs of kernel_params.h that no test packs from Python, with the reason.
NOT_PACKED = {}

TYPE_FORMATS = {"uint32_t": "I", "int32_t": "i", "float": "f"}


def header_structs():
    """{struct: [(field, format)]} from the header's text, in declaration order."""
    text = open(HEADER).read()
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    structs = {}
    for name, body in re.findall(r"\bstruct\s+(\w+)\s*\{(.*?)\};", text, flags=re.S):
        fields = []
        for decl in body.split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            m = re.fullmatch(r"(\w+) (.+)", decl)
            assert m, f"{name}: cannot read the declaration '{decl}'"
            ctype, declarators = m.groups()
            assert ctype in TYPE_FORMATS, f"{name}: field type '{ctype}' is not a plain 4-byte type"
            for d in declarators.split(","):
                dm = re.fullmatch(r"\s*(\w+)\s*(?:\[(\d+)\])?\s*", d)
                assert dm, f"{name}: cannot read the declarator '{d}'"
                count = dm.group(2)
                fields.append((dm.group(1), (count or "") + TYPE_FORMATS[ctype]))
        structs[name] = fields
    return structs


HEADER_STRUCTS = header_structs()


def test_header_is_read():
    assert len(HEADER_STRUCTS) >= 14, sorted(HEADER_STRUCTS)
    assert ("N", "3I") in HEADER_STRUCTS["MultiGemvParams"]
    assert ("seed_hi", "I") in HEADER_STRUCTS["SampleParams"]


def test_module_exports_every_struct_of_the_header():
    missing = sorted(set(HEADER_STRUCTS) - set(LAYOUTS))
    extra = sorted(set(LAYOUTS) - set(HEADER_STRUCTS))
    assert not missing, (f"structs of kernel_params.h that akunu._testing.param_layouts() does not export "
                         f"(src/python/param_layouts.py did not read them from the header): {missing}")
    assert not extra, f"param_layouts() exports structs that kernel_params.h does not declare: {extra}"


@pytest.mark.parametrize("name", sorted(HEADER_STRUCTS))
def test_exported_layout_matches_the_header(name):
    if name not in LAYOUTS:
        pytest.fail(f"{name} is not exported by param_layouts()")
    layout = LAYOUTS[name]
    declared = HEADER_STRUCTS[name]
    exported = list(layout["formats"].items())
    missing = [f for f, _ in declared if f not in layout["fields"]]
    assert not missing, (f"{name}: fields of the header that param_layouts() does not export "
                         f"(src/python/param_layouts.py did not read them): {missing}")
    assert exported == declared, f"{name}: exported fields {exported}, the header declares {declared}"
    # plain 4-byte fields, packed in declaration order: no padding anywhere
    offset = 0
    for field, fmt in declared:
        assert layout["fields"][field] == offset, f"{name}.{field} at offset {layout['fields'][field]}, not {offset}"
        offset += struct.calcsize("=" + fmt)
    assert layout["size"] == offset, f"sizeof({name}) is {layout['size']}, its fields take {offset} bytes"


def test_every_struct_has_a_packer():
    unpacked = sorted(set(LAYOUTS) - set(kp.PACKERS) - set(NOT_PACKED))
    assert not unpacked, (f"structs of kernel_params.h with no packer in tests/fixtures/kernel_params.py "
                          f"(add one with @packs, or list the struct in NOT_PACKED with the reason): {unpacked}")
    assert not set(NOT_PACKED) & set(kp.PACKERS), "a struct listed as not packed has a packer"


def sentinel_arguments(fn, struct_name):
    """Distinct values for every argument of a packer (sequences for array
    arguments: those named Ns / dtypes, or as an array field of the struct)."""
    formats = LAYOUTS[struct_name]["formats"]
    args, value = {}, 101
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("Ns", "dtypes") or formats.get(p.name, "I")[:1].isdigit():
            args[p.name] = [value, value + 1, value + 2]
            value += 3
        else:
            args[p.name] = value
            value += 2
    return args


@pytest.mark.parametrize("name", sorted(kp.PACKERS))
def test_packer_writes_every_field_at_its_offset(name):
    fn = kp.PACKERS[name]
    args = sentinel_arguments(fn, name)
    data = fn(**args)
    layout = LAYOUTS[name]
    assert len(data) == layout["size"], f"{fn.__name__} packs {len(data)} bytes, sizeof({name}) is {layout['size']}"
    # read back at the C++ offsets, independently of kp.unpack
    for field, offset in layout["fields"].items():
        fmt = "=" + layout["formats"][field]
        got = struct.unpack_from(fmt, data, offset)
        got = got if len(got) > 1 else got[0]
        if field in args:  # an argument named as the field lands in it
            want = tuple(args[field]) if isinstance(args[field], list) else args[field]
            assert got == want, f"{fn.__name__}: {name}.{field} at offset {offset} holds {got}, not {want}"


def test_packer_arguments_that_name_fields_differently():
    """Packers whose arguments are not named as the fields: each mapping read back."""
    r = kp.unpack("RopeParams", kp.rope(1, 2, 3, 4, 5, 6, 7, 8.5, 9.5, 10.5))
    assert (r["has_freq_factors"], r["freq_base"], r["freq_scale"], r["attn_factor"]) == (7, 8.5, 9.5, 10.5)
    assert kp.unpack("RopeParams", kp.rope(1, 2, 3, 4, 5, 6, 7, 8.5, 9.5))["attn_factor"] == 1.0
    q = kp.unpack("QKRopeKVParams", kp.qk_norm_rope_kv(1, 2, 3, 4, 5, 6, 7.5, 8.5, 9, 10, 11.5, 12.5, 13, 14.5))
    assert (q["has_freq_factors"], q["freq_base"], q["freq_scale"], q["max_ctx"], q["attn_factor"]) == (
        10, 11.5, 12.5, 13, 14.5)
    assert kp.unpack("QKRopeKVParams", kp.qk_norm_rope_kv(*range(1, 14)))["attn_factor"] == 1.0
    assert kp.unpack("Im2ColParams", kp.im2col(1, 2, 3, 4, 5, 6))["kernel_size"] == 4
    g = kp.unpack("GatedActParams", kp.gated(7, 2))
    assert (g["gate_stride"], g["up_stride"], g["out_stride"]) == (7, 7, 7)
    s = kp.unpack("SampleParams", kp.sample(10, presence=0.5, frequency=0.25, window=33, seed=(5 << 32) | 6))
    assert (s["presence_penalty"], s["frequency_penalty"], s["penalty_window"]) == (0.5, 0.25, 33)
    assert (s["seed_lo"], s["seed_hi"]) == (6, 5)
    m = kp.unpack("MultiGemvParams", kp.multi_gemv(64, 1, kp.MULTI_SILU, [8, 8], [1, 1]))
    assert (m["n_mats"], m["N"], m["dtype"]) == (2, (8, 8, 0), (1, 1, 0))
    n = kp.unpack("NormParams", kp.norm(64, 2, 1, 128, 1e-6))
    assert n["y_stride"] == 128


def test_pack_refuses_missing_and_unknown_fields():
    with pytest.raises(ValueError, match="not set"):
        kp.pack("AddParams", n=1)
    with pytest.raises(ValueError, match="not in the struct"):
        kp.pack("AddParams", n=1, n_tokens=1, stride=2)


def test_multi_gemv_modes_are_the_headers():
    modes = _testing.param_enums()["MultiGemvMode"]
    assert (kp.MULTI_SEPARATE, kp.MULTI_SILU, kp.MULTI_GELU, kp.MULTI_ACCUMULATE) == (
        modes["kGemvSeparate"], modes["kGemvSiluGate"], modes["kGemvGeluGate"], modes["kGemvAccumulate"])


def test_moe_gating_values_are_the_headers():
    gating = _testing.param_enums()["MoeGating"]
    assert (kp.MOE_SOFTMAX, kp.MOE_SIGMOID) == (gating["kMoeSoftmax"], gating["kMoeSigmoid"])
