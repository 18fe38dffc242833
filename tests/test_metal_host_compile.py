"""backend/metal/metal_device.mm compiled here (Objective-C++, ARC) with
clang++ against hand-written declarations of the Apple API it uses
(backend/metal/host_check/include, from Apple's documentation):
backend/metal/check_host_compile.sh. It checks syntax, types and that every
selector the file sends is one Metal / Foundation declares; it does not link
or run (no Metal runtime here: see backend/metal/README.md)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "backend", "metal", "check_host_compile.sh")
SOURCE = os.path.join(ROOT, "backend", "metal", "metal_device.mm")


pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the build compiles metal_device.mm "
                                "against Apple's own SDK")


def check(path=None):
    out = subprocess.run(["bash", SCRIPT] + ([path] if path else []), capture_output=True, text=True)
    if out.returncode == 2:
        pytest.skip(out.stderr.strip())
    return out


def test_metal_device_compiles_against_apples_declarations():
    out = check()
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("before,after,message", [
    ("[impl_->cmd commit]", "[impl_->cmd comit]", "comit"),                 # a misspelt selector
    ("MTLResourceStorageModeShared", "MTLResourceStorageModeShard", "MTLResourceStorageModeShard"),
    ("setBytes:params length:", "setBytes:params size:", "setBytes:size:atIndex:"),  # a wrong keyword
    ("(__bridge_retained void*)b", "(void*)b", "ARC"),                     # ARC's bridging rules apply
])
def test_the_check_catches_api_mistakes(tmp_path, before, after, message):
    """The check can fail: the file with one API mistake does not compile."""
    with open(SOURCE) as f:
        text = f.read()
    assert before in text
    bad = tmp_path / "metal_device.mm"
    bad.write_text(text.replace(before, after, 1))
    out = check(str(bad))
    assert out.returncode == 1 and message in out.stderr, out.stderr[-2000:]
