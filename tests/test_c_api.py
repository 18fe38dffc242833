"""The C API (include/akunu/akunu.h, libakunu) driven from C: tests/c_api/check.c
is compiled with the system C compiler against the built library and its
output compared with the Python API on the same model."""

import glob
import os
import shutil
import subprocess

import pytest

import akunu
from tests.fixtures import random_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_INCLUDE = os.path.join(os.path.dirname(HERE), "include")
N_CTX = 128  # what check.c loads with


def _compiler(env, names):
    for name in ([os.environ[env]] if os.environ.get(env) else []) + names:
        path = shutil.which(name)
        if path:
            return path
    return None


CC = _compiler("CC", ["cc", "gcc", "clang"])
CXX = _compiler("CXX", ["c++", "g++", "clang++"])
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc, clang or $CC) found")


def _lib_dir():
    pkg = os.path.dirname(akunu.__file__)
    for d in (os.path.join(pkg, "lib"), os.path.dirname(os.path.realpath(akunu._core.__file__))):
        if glob.glob(os.path.join(d, "libakunu.so*")) or glob.glob(os.path.join(d, "libakunu*.dylib")):
            return d
    pytest.fail("libakunu is missing from the akunu package (akunu/lib) and the build tree")


def _include_dir():
    installed = os.path.join(os.path.dirname(akunu.__file__), "include")
    return installed if os.path.exists(os.path.join(installed, "akunu", "akunu.h")) else REPO_INCLUDE


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("capi") / "check")
    lib = _lib_dir()
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", _include_dir(),
                    os.path.join(HERE, "c_api", "check.c"), "-L", lib, "-lakunu", f"-Wl,-rpath,{lib}", "-o", exe],
                   check=True, capture_output=True, text=True)

    def run(model_path, *args):
        p = subprocess.run([exe, model_path, *map(str, args)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return [line.split(" ") for line in p.stdout.splitlines()]

    return run


def _rows(out, key):
    return [r[1:] for r in out if r[0] == key]


def _ints(row):
    return [int(x) for x in row]


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("capi_m") / "qwen3.gguf")
    random_gguf.write_model(path, "qwen3", "F16", seed=5)
    return akunu.load(path, n_ctx=N_CTX)


def _models(request):
    if request.param == "random":
        return request.getfixturevalue("random_model")
    return akunu.load(request.getfixturevalue("gemma_path"), n_ctx=N_CTX)


@pytest.fixture(scope="module", params=["random", "gemma"])
def model(request):
    return _models(request)


def _prompt(model):
    return [2, 651, 6037, 576, 9405, 603] if model.config["architecture"] == "gemma3" else [1, 2, 3, 4, 5, 6]


def _greedy(model, prompt, n):
    core = model._core()
    core.truncate(0)
    first = core.prefill(prompt)
    return [first] + list(core.decode_greedy(first, n - 1, []))


def test_prefill_decode_step_and_chain_match_python(check, model):
    prompt, n = _prompt(model), 8
    want = _greedy(model, prompt, n)
    out = check(model.path, "greedy", n, *prompt)
    assert _ints(_rows(out, "steps")[0]) == want
    assert _ints(_rows(out, "chain")[0]) == want[1:]
    # position after the step loop and after the chain: prompt + fed tokens
    assert [int(r[0]) for r in _rows(out, "position")] == [len(prompt) + n - 1] * 2
    # a decode_step at an earlier position rewinds the context there
    assert _ints(_rows(out, "rewind")[0]) == [want[1], len(prompt) + 1]


def test_stream_callback_stop_continue_and_stats(check, model):
    prompt, k, max_tokens = _prompt(model), 3, 10
    want = _greedy(model, prompt, max_tokens)
    out = check(model.path, "stream", k, max_tokens, *prompt)
    assert _ints(_rows(out, "all")[0]) == want
    stats = _rows(out, "stats")[0]
    assert _ints(stats[:2]) == [len(prompt), max_tokens]
    prefill_ms, decode_ms, prefill_tps, decode_tps = map(float, stats[2:])
    assert prefill_ms > 0 and decode_ms > 0
    assert prefill_tps == pytest.approx(len(prompt) * 1000 / prefill_ms, rel=1e-3)
    assert decode_tps == pytest.approx((max_tokens - 1) * 1000 / decode_ms, rel=1e-3)
    # the callback returning false after k tokens: exactly k, and the context
    # holds the prompt and the k - 1 tokens fed before the last one
    assert _ints(_rows(out, "cut")[0]) == want[:k]
    assert _rows(out, "cutstats")[0] == [str(len(prompt)), str(k), "position", str(len(prompt) + k - 1)]
    # continuing from there reproduces the uninterrupted stream
    assert _ints(_rows(out, "continued")[0]) == want[k:max_tokens]
    # a stop id is emitted and ends the stream
    stop_at = want.index(want[2])
    assert _ints(_rows(out, "stopped")[0]) == want[: stop_at + 1]
    # seeded sampling repeats and matches the Python API with the same settings
    a, b = (_ints(r) for r in _rows(out, "sampled"))
    assert a == b and len(a) == max_tokens
    core = model._core()
    core.truncate(0)
    core.set_sampling(temperature=0.8, seed=7)
    core.prefill(prompt)
    first = core.sample_next()
    assert a == [first] + list(core.decode_sampled(first, max_tokens - 1, []))
    core.set_sampling()


def test_tensor_table_memory_and_whisper_flag(check, model):
    out = check(model.path, "tensors")
    tensors = model._core().tensors
    assert int(_rows(out, "count")[0][0]) == len(tensors)
    assert [(r[0], int(r[1]), r[2]) for r in _rows(out, "tensor")] == [
        (t["name"], t["type_id"], t["dtype"]) for t in tensors]
    assert int(_rows(out, "memory")[0][0]) == model.memory_bytes
    assert _rows(out, "whisper")[0] == ["0"]


def test_profile_decode_step_labels_match_python(check, random_model):
    out = check(random_model.path, "profile", 5)
    core = random_model._core()
    core.truncate(0)
    labels = [label for label, _ in core.profile_decode(5)]
    assert _rows(out, "entries")[0] == [str(len(labels)), "position", "0"]  # the step is undone
    entries = _rows(out, "entry")
    assert [e[0] for e in entries] == labels
    assert all(float(e[1]) >= 0 for e in entries) and sum(float(e[1]) for e in entries) > 0
    assert _rows(out, "short")[0] == ["-1"]
    assert "buffer holds" in " ".join(_rows(out, "short_error")[0])


def test_errors_for_null_and_freed_handles_and_bad_indices(check, random_model):
    out = {r[1]: (int(r[2]), " ".join(r[3:])) for r in check(random_model.path, "errors")}
    expect = {
        "prefill_null_model": (1, "null model handle"),
        "prefill_null_tokens": (1, "bad argument"),
        "prefill_null_out": (1, "bad argument"),
        "prefill_bad_token": (1, "outside the vocabulary"),
        "decode_null_model": (1, "null model handle"),
        "decode_bad_position": (1, "position 100000 is outside"),
        "decode_negative_position": (1, "position -1 is outside"),
        "chain_null_out": (1, "bad argument"),
        "chain_negative_count": (1, "bad argument"),
        "position_null": (-1, "null model handle"),
        "stream_null_model": (1, "null model handle"),
        "stream_null_prompt": (1, "bad argument"),
        "stream_null_stops": (1, "bad argument"),
        "continue_null_model": (1, "null model handle"),
        "tensor_count_null": (-1, "null model handle"),
        "tensor_name_negative": (0, "tensor index -1 is outside"),
        "tensor_name_past_end": (0, "is outside [0,"),
        "tensor_dtype_past_end": (-1, "is outside [0,"),
        "tensor_raw_null": (0, "null model handle"),
        "memory_null": (0, "null model handle"),
        "whisper_null": (-1, "null model handle"),
        "profile_null_out": (-1, "bad argument"),
        "profile_bad_position": (-1, "is not the cached position"),
        "profile_label_none": (0, "outside the 0 entries"),
        "freed_position": (-1, "not a live model handle"),
        "freed_prefill": (1, "not a live model handle"),
        "freed_tensor_count": (-1, "not a live model handle"),
    }
    assert set(out) == set(expect)
    for name, (value, message) in expect.items():
        assert out[name][0] == value and message in out[name][1], (name, out[name])


@pytest.mark.parametrize("std,source", [("c99", "header_c.c"), ("c++17", "header_cxx.cpp")])
def test_header_compiles_strictly(tmp_path, std, source):
    compiler = CC if std == "c99" else CXX
    if compiler is None:
        pytest.skip("no C++ compiler (c++, g++, clang++ or $CXX) found")
    p = subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", _include_dir(),
                        "-c", os.path.join(HERE, "c_api", source), "-o", str(tmp_path / "h.o")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_example_program_builds_and_runs(tmp_path, random_model):
    lib, exe = _lib_dir(), str(tmp_path / "example")
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", _include_dir(),
                    os.path.join(HERE, "c_api", "example.c"), "-L", lib, "-lakunu", f"-Wl,-rpath,{lib}",
                    "-o", exe], check=True)
    p = subprocess.run([exe, random_model.path, "1", "2", "3"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    want = _greedy(random_model, [1, 2, 3], 16)
    assert p.stdout.splitlines()[0] == " ".join(map(str, want))
    assert "tok/s" in p.stdout


def _installed_prefix():
    """The directory holding the installed akunu package (a wheel's site-packages),
    which is the prefix of its CMake package config and pkg-config file."""
    pkg = os.path.dirname(os.path.realpath(akunu.__file__))
    if not glob.glob(os.path.join(pkg, "lib", "libakunu*")):
        pytest.skip("libakunu comes from a build tree, not an installed akunu package (pip install .)")
    return os.path.dirname(pkg)


def _pc_flags(pc_path):
    """Cflags and Libs of a .pc file, its ${var} references expanded (as pkg-config does)."""
    import re
    env, fields = {"pcfiledir": os.path.dirname(pc_path)}, {}
    expand = lambda v: re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], v)  # noqa: E731
    for line in open(pc_path):
        line = line.strip()
        if re.match(r"^\w+=", line):
            k, v = line.split("=", 1)
            env[k] = expand(v)
        elif re.match(r"^\w+:", line):
            k, v = line.split(":", 1)
            fields[k] = expand(v.strip())
    return fields["Cflags"].split() + fields["Libs"].split()


def test_pkg_config_file_builds_the_example(tmp_path, random_model):
    prefix = _installed_prefix()
    pc = os.path.join(prefix, "akunu", "lib", "pkgconfig", "akunu.pc")
    assert os.path.exists(pc), "akunu.pc is not installed with the package"
    flags = _pc_flags(pc)
    libdir = next(f[2:] for f in flags if f.startswith("-L"))
    exe = str(tmp_path / "example")
    subprocess.run([CC, "-std=c99", os.path.join(HERE, "c_api", "example.c"), *flags, f"-Wl,-rpath,{libdir}",
                    "-o", exe], check=True)
    p = subprocess.run([exe, random_model.path, "1", "2", "3"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.split("\n")[0] == " ".join(map(str, _greedy(random_model, [1, 2, 3], 16)))


def test_cmake_find_package_links_libakunu(tmp_path, random_model):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not on PATH")
    prefix = _installed_prefix()
    src = tmp_path / "consumer"
    src.mkdir()
    shutil.copy(os.path.join(HERE, "c_api", "example.c"), src / "example.c")
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(consumer C)\nfind_package(akunu 0.1 REQUIRED)\n"
        "add_executable(example example.c)\ntarget_link_libraries(example PRIVATE akunu::akunu)\n")
    build = tmp_path / "build"
    env = dict(os.environ, CC=CC)
    for cmd in ([cmake, "-S", str(src), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"],
                [cmake, "--build", str(build)]):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([str(build / "example"), random_model.path, "1", "2", "3"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.split("\n")[0] == " ".join(map(str, _greedy(random_model, [1, 2, 3], 16)))
