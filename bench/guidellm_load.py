"""guidellm (pip install guidellm) as a load generator for bench.serving and
bench.serving_check: one run of concurrent streams against an OpenAI-style
server, its figures in bench.serving's keys (tok_s, TTFT and ITL p50 / p99,
and the CPU seconds its process took)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from typing import Dict, Optional


def tokenizer_folder(gguf_path: str, dest: str) -> str:
    """The GGUF's tokenizer as a tokenizer.json folder (guidellm builds and
    counts its prompts through it), read from the file's metadata alone."""
    from akunu import _core
    from akunu.tokenizer import GGUFTokenizer

    GGUFTokenizer(_core.read_gguf(gguf_path)["metadata"]).save_tokenizer_json(dest)
    return dest


def run(exe: str, url: str, tokenizer_dir: str, streams: int, requests: int, prompt_tokens: int,
        output_tokens: int, work: str, prompt_min: Optional[int] = None, prompt_max: Optional[int] = None) -> Dict:
    """`requests` requests over `streams` concurrent streams; prompts of
    prompt_tokens (or spread over [prompt_min, prompt_max] around it),
    exactly output_tokens out (guidellm sends ignore_eos)."""
    data = {"kind": "synthetic_text", "prompt_tokens": prompt_tokens, "output_tokens": output_tokens}
    if prompt_min is not None and prompt_max is not None:
        # guidellm draws lengths from a clipped normal: a uniform range's mean and spread
        data.update(prompt_tokens_min=prompt_min, prompt_tokens_max=prompt_max,
                    prompt_tokens_stdev=max(1, int((prompt_max - prompt_min) / 12 ** 0.5)))
    scenario = {
        "metadata": {"name": "akunu-bench", "description": "concurrent streams"},
        "spec": {
            "backend": {"kind": "openai_http", "target": url, "request_format": "/v1/completions"},
            "profile": {"kind": "concurrent", "streams": streams},
            "data": [data],
            "constraints": [{"kind": "max_requests", "count": requests}],
        },
    }
    os.makedirs(work, exist_ok=True)
    path, out = os.path.join(work, "scenario.json"), os.path.join(work, "guidellm.json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    if os.path.exists(out):
        os.remove(out)
    cmd = [exe, "run", "-c", path, "--tokenizer", f"kind=hf_auto,model={tokenizer_dir}",
           "--output", f"kind=json,path={out}", "--disable-console"]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not os.path.exists(out):
        sys.exit(f"guidellm failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    with open(out) as f:
        b = json.load(f)["benchmarks"][0]
    m = b["metrics"]

    def pct(key: str, p: str) -> float:
        return float(m[key]["successful"]["percentiles"][p])

    ttft = m["time_to_first_token_ms"]["successful"]
    return {"clients": streams, "requests": int(ttft["count"]),
            "output_tokens": int(m["output_token_count"]["successful"]["total_sum"]),
            "wall_s": float(b["duration"]), "tok_s": float(m["output_tokens_per_second"]["successful"]["mean"]),
            "ttft_p50_ms": pct("time_to_first_token_ms", "p50"), "ttft_p99_ms": pct("time_to_first_token_ms", "p99"),
            "itl_p50_ms": pct("inter_token_latency_ms", "p50"), "itl_p99_ms": pct("inter_token_latency_ms", "p99"),
            "client_cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)}
