"""The project speaks of itself: what the code is and does, hardware named as
hardware, results by date and commit. No tracked file describes how the work
was organised (numbered rounds of work, leases of machines) or a workflow of
copying files to another machine and running there (what travels, transfer
limits, that machine's output folder).

The patterns and their examples are written in pieces (a "~" the test
removes) so that this file does not match them itself.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

S = "sess" + "ion"
PATTERNS = [
    rf"\b{S}s? \d+",                           # a numbered round, or several
    rf"\b{S}'s\b",
    rf"\b(this|that|next|last|one|a|the|each|every) {S} (run|command|script)\b",
    rf"\b{S}_[a-z]",                            # a script named after the rounds of work
    r"\b(gpu|device|developer|remote|dev) (machine|box)e?s?\b",
    r"\bdevice tool\b",
    r"\bnvidia-h[12]00-x\d",                    # the name of a lent machine
    r"\bcarry (list|limit)s?\b",
    r"\bnot carried\b",
    r"'s car" r"ry\b",                          # what a script took along
    r"\bcuda_carry",
    r"\b(another|one|same|the|this) lease\b",
    r"\bminutes of device time\b",
    r"\bwork rounds?\b",
    r"\$" r"OUT\b",                             # the output folder of a run elsewhere
]
WORDS = re.compile("|".join(f"(?:{p})" for p in PATTERNS), re.IGNORECASE)
SKIP_DIRS = ("tests/golden/", "tests/models/", "tests/data/", "fuzz/corpus/")
# A file that uses a word in its ordinary sense (and no other), by path: reason
ALLOWED = {}


def tracked_text_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: git ls-files is unavailable")
    for path in out.decode().split("\0"):
        if not path or path.startswith(SKIP_DIRS) or path in ALLOWED:
            continue
        full = os.path.join(ROOT, path)
        if not os.path.isfile(full):  # deleted in the working tree
            continue
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue  # binary
        try:
            yield path, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def hits_in(text: str):
    for n, line in enumerate(text.splitlines(), 1):
        m = WORDS.search(line)
        if m:
            yield n, m.group(0), line.strip()


def test_patterns_catch_what_they_are_for():
    caught = [t.replace("~", "") for t in (
        f"BENCHMARKS.md {S} 21", f"measured slower in {S}s 10 and 11", "on the GPU ~machine",
        "the device ~tool's 64 MiB limit", "over the carry ~limit", "(a script's ~carry)", "not ~carried",
        "nvidia-~h100-x1", "tools/cuda_~carry.sh", "in another ~lease", "OUT=$~OUT", "a developer ~machine")]
    fine = ['@pytest.fixture(scope="session")', "a bounded fuzzing session", "blocks carry their own scale",
            "files that carry none", "a carry bit", "the device's memory", "GPU memory", "Outlook"]
    assert all(WORDS.search(t) for t in caught), [t for t in caught if not WORDS.search(t)]
    assert not any(WORDS.search(t) for t in fine), [t for t in fine if WORDS.search(t)]


def test_no_file_describes_the_work_organisation_or_a_remote_workflow():
    found = []
    for path, text in tracked_text_files():
        for n, word, line in hits_in(text):
            found.append(f"{path}:{n}: '{word}': {line[:140]}")
    assert not found, f"{len(found)} lines describe how the work was organised or a remote workflow:\n" + \
        "\n".join(found)


SCRIPT = re.compile(r"(?<![\w/.-])((?:tools|bench|tests/fixtures)/[\w-]+\.(?:py|sh|cu|h))\b"
                    r"|python3? -m ((?:tools|bench)\.[a-z_][a-z0-9_]*)\b(?!\.)")


def test_named_scripts_exist():
    """A script or module a file names to run (tools/..., bench/..., python -m tools.NAME) exists."""
    missing = []
    for path, text in tracked_text_files():
        for n, line in enumerate(text.splitlines(), 1):
            for m in SCRIPT.finditer(line):
                name = m.group(1) or m.group(2).replace(".", "/") + ".py"
                if not os.path.exists(os.path.join(ROOT, name)):
                    missing.append(f"{path}:{n}: {m.group(0)}")
    assert not missing, "files name scripts that are not there:\n" + "\n".join(missing)
