"""The MSL emulation itself (backend/metal/emulation): SIMD-group functions
against their definitions, lanes that returned taking no part, threadgroup
memory shared by a threadgroup's threads, simdgroup_matrix products, and a
threadgroup waiting at two different barriers reported as an error (not a hang)."""

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def lib():
    if not shutil.which("clang++"):
        pytest.skip("clang++ is not installed (Debian: apt-get install clang)")
    out = subprocess.run(["bash", os.path.join(ROOT, "tools", "build_msl_emulation.sh"),
                          os.path.join(ROOT, "tests", ".cache", "msl-emu")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return ctypes.CDLL(out.stdout.strip().splitlines()[-1])


def run(lib, name, arrays, n, threads, groups=1, tg_mem=0):
    bufs = (ctypes.c_void_p * 16)(*[a.ctypes.data for a in arrays])
    params = np.array([n] + [0] * 15, np.uint32)
    grid = (ctypes.c_uint * 3)(groups, 1, 1)
    err = ctypes.create_string_buffer(512)
    rc = lib.akunu_msl_emu_run(name.encode(), bufs, len(arrays), params.ctypes.data_as(ctypes.c_void_p), grid,
                               ctypes.c_uint(threads), ctypes.c_size_t(tg_mem), err, ctypes.c_size_t(512))
    return rc, err.value.decode()


@pytest.mark.parametrize("threads,n", [(64, 64), (96, 70), (40, 40)])
def test_simd_functions(lib, threads, n):
    out = np.full((threads, 9), np.nan, np.float32)
    rc, err = run(lib, "selftest_simd", [out], n, threads, tg_mem=4 * threads)
    assert rc == 0, err
    v = np.array([t * 3 % 17 for t in range(threads)], np.float32)
    for t in range(n):
        sg, lane = t // 32, t % 32
        members = [i for i in range(sg * 32, min(sg * 32 + 32, threads)) if i < n]  # lanes still running
        o = out[t]
        assert o[0] == v[members].sum() and o[1] == v[members].max()
        partner = t ^ 1
        assert o[2] == (v[partner] if partner in members else v[t])
        assert o[3] == (v[t + 1] if t + 1 in members else v[t])
        assert o[4] == v[sg * 32 + 3]
        assert o[5] == v[[i for i in members if i < t]].sum()
        assert o[6] == v[:n].sum() and o[7] == sg and o[8] == lane
    assert np.isnan(out[n:]).all()  # returned lanes wrote nothing


def test_divergent_barrier_is_an_error(lib):
    out = np.zeros(64, np.float32)
    rc, err = run(lib, "selftest_divergent_barrier", [out], 10, 64, groups=3)
    assert rc != 0 and "divergent barrier" in err
    rc, err = run(lib, "selftest_divergent_barrier", [out], 64, 64)  # all at the same barrier: fine
    assert rc == 0, err
    assert (out == 1).all()


def test_simdgroup_matrix(lib):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3))
    expect = a.astype(np.float64) @ b + c
    rc, err = run(lib, "selftest_matrix", [a, b, c], 0, 32)
    assert rc == 0, err
    np.testing.assert_allclose(c, expect, rtol=1e-5, atol=1e-5)


def test_limits_are_checked(lib):
    out = np.zeros(9 * 2048, np.float32)
    rc, err = run(lib, "selftest_simd", [out], 1, 2048)
    assert rc != 0 and "threads per threadgroup" in err
    rc, err = run(lib, "selftest_simd", [out], 1, 32, tg_mem=65536)
    assert rc != 0 and "32 KiB" in err
    rc, err = run(lib, "no_such_kernel", [out], 1, 32)
    assert rc != 0 and "no Metal kernel" in err
