"""The product's binding is clean: akunu._core carries no test hooks and the
core includes no backend header (the device factory in backend/ is the one
place that knows the backends; akunu._testing, the test-only extension, is the
one binding that reaches into them); akunu works without akunu._testing; the
test device "metal-emu" exists only while its library loads."""

import os
import re
import subprocess
import sys

import pytest

import akunu
from akunu import _core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND_INCLUDE = re.compile(r'^\s*#\s*include\s*["<](cpu|cuda|metal)/', re.M)
# The test hooks' module: it runs single kernels and looks into the backends.
ALLOWED = {os.path.join("src", "python", "testing_module.cpp")}


def test_core_includes_no_backend_header():
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, ROOT)
            if rel in ALLOWED or not f.endswith((".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".mm")):
                continue
            text = open(path, encoding="utf-8", errors="replace").read()
            found += [f"{rel}: {m.group(0).strip()}" for m in BACKEND_INCLUDE.finditer(text)]
    assert not found, "backend headers included under src/ (only backend/ knows the backends):\n" + "\n".join(found)


def test_core_module_has_no_test_hooks():
    private = [n for n in dir(_core) if n.startswith("_") and not n.startswith("__")]
    assert not private, f"akunu._core exports test hooks (they belong in akunu._testing): {private}"


def test_akunu_works_without_the_testing_module(small_model):
    code = (
        "import sys\n"
        "sys.modules['akunu._testing'] = None  # as in a wheel built with AKUNU_TESTING=OFF\n"
        "import akunu\n"
        "m = akunu.load(sys.argv[1], n_ctx=64)\n"
        "assert m.logits([1, 2, 3]).shape[0] == 3\n"
        "m.generate('hello', max_tokens=4, temperature=0)\n"
        "try:\n"
        "    from akunu import _testing\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    env = dict(os.environ)
    env.pop("AKUNU_MSL_EMU_LIB", None)
    out = subprocess.run([sys.executable, "-c", code, small_model], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_metal_emu_is_no_device_without_its_library(monkeypatch, small_model):
    from akunu import _testing

    monkeypatch.delenv("AKUNU_MSL_EMU_LIB", raising=False)
    names = _core.device_names()
    assert "metal-emu" not in names and names[:2] == ["auto", "cpu"], names
    with pytest.raises(akunu.AkunuError, match="unknown device 'metal-emu'"):
        akunu.load(small_model, device="metal-emu")
    x = [__import__("numpy").zeros(4, "float32") for _ in range(2)]
    from tests.fixtures import kernel_params as kp

    with pytest.raises(akunu.AkunuError, match=r"unknown device 'metal-emu' \(devices: 'auto', 'cpu'.*AKUNU_MSL_EMU_LIB"):
        _testing.run_kernel("add_inplace", x, kp.add(4, 1), device="metal-emu")
    monkeypatch.setenv("AKUNU_MSL_EMU_LIB", os.path.join(ROOT, "tests", "no-such-library.so"))
    assert "metal-emu" not in _core.device_names()
    with pytest.raises(akunu.AkunuError, match="cannot load"):
        _testing.run_kernel("add_inplace", x, kp.add(4, 1), device="metal-emu")
    with pytest.raises(akunu.AkunuError, match="unknown device 'tpu'"):
        _testing.run_kernel("add_inplace", x, kp.add(4, 1), device="tpu")


def test_metal_emu_is_a_device_with_its_library(monkeypatch):
    from tests.test_device_kernels import build_metal_emulation

    monkeypatch.delenv("AKUNU_MSL_EMU_LIB", raising=False)  # restored after the test
    build_metal_emulation()  # skips without clang++; sets AKUNU_MSL_EMU_LIB
    assert "metal-emu" in _core.device_names()
