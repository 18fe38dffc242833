"""What the table drivers share: running akunu-bench, the machine and commit
a table was measured on, the wide pp / tg table of BENCHMARKS.md, JSON."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("AKUNU_BENCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "akunu-bench"))


def akunu_bench(model: str, *args: str) -> List[Dict]:
    """Rows of `akunu-bench MODEL ARGS -o json` (a process of its own for each model)."""
    cmd = [sys.executable, "-m", "akunu.cli.bench", model, *args, "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd[2:])} failed:\n{out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def check_akunu_device(device: str, advice: str) -> None:
    """Fails early (before building llama.cpp and writing models) when akunu cannot run a tiny model on
    `device`; `advice` says how to get a build that can."""
    import tempfile

    import akunu
    from tests.fixtures import random_gguf

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.gguf")
        random_gguf.write_model(path, "llama", "F16")
        try:
            akunu.load(path, device=device).close()
        except akunu.AkunuError as e:
            sys.exit(f"akunu cannot run on {device} here ({e}): {advice}")


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "") if out.returncode == 0 else "?"
    except OSError:
        return "?"


def header(rows: List[Dict], command: str) -> str:
    """Date, machine, commit and command of a table, as BENCHMARKS.md records them."""
    r = rows[0] if rows else {}
    machine = r.get("gpu_info") or r.get("cpu_info") or platform.processor()
    cores = os.cpu_count()
    peers = sorted({f"{x['peer_build']} ({x['peer_settings']})" for x in rows if x.get("peer_build")})
    lines = [f"- Date: {datetime.date.today().isoformat()}",
             f"- Machine: {machine}" + (f", {cores} host cores" if r.get("gpu_info") else f", {cores} cores"),
             f"- Commit: {commit()} (akunu {r.get('akunu_version', '?')})",
             f"- Command: `{command}`"]
    lines += [f"- Peer: {p}" for p in peers]
    return "\n".join(lines)


def cell(r: Optional[Dict]) -> str:
    return f"{r['avg_ts']:.1f} ± {r['stddev_ts']:.1f}" if r else "-"


def text_table(results: List[tuple], pp: int, tg: int) -> str:
    """One line per (model, format): akunu and llama.cpp pp and tg tok/s, and the ratios."""
    lines = [f"| model | format | akunu pp{pp} | llama.cpp pp{pp} | ratio | akunu tg{tg} | llama.cpp tg{tg} | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for name, fmt, rows in results:
        by = {(r["engine"], r["test"]): r for r in rows}
        parts = [name, fmt]
        for test in (f"pp{pp}", f"tg{tg}"):
            a, p = by.get(("akunu", test)), by.get(("llama.cpp", test))
            parts += [cell(a), cell(p), f"{a['avg_ts'] / p['avg_ts']:.2f}x" if a and p else "-"]
        lines.append("| " + " | ".join(parts) + " |")
    return "\n".join(lines)


def save_json(name: str, path: Optional[str], payload) -> str:
    path = path or os.path.join(CACHE, f"{name}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    return path


def command_line(module: str) -> str:
    return " ".join(["python", "-m", module] + sys.argv[1:])
