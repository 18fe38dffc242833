"""backend/README.md's table of ops is the map a contributor follows: every
kernel of the CPU backend (the reference set) has a row, and every file a
row names exists, so an op is found on each backend in one step."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "backend", "README.md")
FOLDERS = ("cpu/kernels", "metal/kernels", "cuda/kernels")


def table_rows():
    rows = []
    for line in open(README, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.append(cells)
    assert rows, "backend/README.md has no table of ops"
    return rows


def op_patterns():
    """Each op cell's names as regular expressions (`<format>` any format suffix)."""
    pats = []
    for op_cell, *_ in table_rows():
        for name in re.findall(r"`([^`]+)`", op_cell):
            pats.append(re.compile(re.escape(name).replace(re.escape("<format>"), r"[a-z0-9_]+") + "$"))
    return pats


def test_every_cpu_kernel_has_a_row():
    testing = pytest.importorskip("akunu._testing", reason="akunu was built without its test module")
    pats = op_patterns()
    missing = sorted(n for n in testing.cpu_kernel_names() if not any(p.match(n) for p in pats))
    assert not missing, f"kernels without a row in backend/README.md: {missing}"


def test_every_named_file_exists():
    missing = []
    for row in table_rows():
        for folder, cell in zip(FOLDERS, row[1:]):
            for name in re.findall(r"`([^`]+\.(?:cpp|metal|cu|cuh|h))`", cell):
                if not os.path.exists(os.path.join(ROOT, "backend", folder, name)):
                    missing.append(f"{folder}/{name}")
    assert not missing, f"backend/README.md names files that do not exist: {missing}"
