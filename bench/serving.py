"""Serving many users at once, akunu-serve beside llama.cpp's llama-server:
aggregate output tok/s, time to first token and inter-token latency (p50 /
p99) at several concurrency levels, through HTTP (/v1/completions, streamed),
both servers on the same random-weight GGUF files, one after the other on
the same machine. Each server gets as many parallel slots as there are
clients (akunu-serve --parallel N; llama-server -np N with continuous
batching and flash attention, every layer on the GPU).

  pip install ".[test]"     # with nvcc on PATH, so that akunu builds its CUDA backend
  python -m bench.serving --llama-cpp SRC [--shapes llama-3.2-1b] [--formats F16,Q4_K_M] [--clients 1,4,16,64]
  python -m bench.serving --llama-server BIN_DIR ...      # prebuilt llama-server and llama-quantize
  python -m bench.serving --device cpu --clients 1,4,8 --shapes qwen3-0.6b --formats Q4_0 ...   # on a CPU
  ... --same-requests      # every level the same requests: the 1-client row is them one after another
  ... --generator guidellm   # guidellm's clients instead of this script's (pip install guidellm)

The load: one thread per client, each sending its share of a fixed prompt set
(seed 0; prompt lengths uniform in [--min-input, --max-input] random token
ids; --max-tokens output tokens each, end-of-sequence ignored where the
server allows it) back to back. The ceiling column is the decode-only limit
of the weight reads: clients x copy bandwidth / weight bytes per step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Dict, List, Optional

import numpy as np

from . import common, guidellm_load, text_models


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the server did not become healthy in time")


def stream_completion(url: str, body: Dict) -> Dict:
    """One streamed completion: times of the first and every later chunk, tokens received."""
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    times: List[float] = []
    finish = None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            choice = (chunk.get("choices") or [{}])[0]
            if choice.get("text"):
                times.append(time.perf_counter())
            finish = choice.get("finish_reason") or finish
    n = body["max_tokens"] if finish == "length" else len(times)
    return {"start": t0, "times": times, "tokens": n}


def run_load(url: str, prompts: List[List[int]], clients: int, max_tokens: int, extra: Dict) -> Dict:
    """Every prompt once, spread over `clients` threads; aggregate and latency figures."""
    results: List[Dict] = []
    lock = threading.Lock()
    shares = [prompts[i::clients] for i in range(clients)]
    errors: List[str] = []

    def client(share):
        for p in share:
            try:
                r = stream_completion(url, {"prompt": p, "max_tokens": max_tokens, "temperature": 0,
                                            "stream": True, **extra})
            except Exception as e:  # noqa: BLE001 (counted and reported)
                errors.append(repr(e))
                continue
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(s,)) for s in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")
    ttft = [r["times"][0] - r["start"] for r in results if r["times"]]
    itl = [(r["times"][-1] - r["times"][0]) / (r["tokens"] - 1) for r in results
           if len(r["times"]) > 1 and r["tokens"] > 1]
    q = lambda v, p: float(np.percentile(v, p)) * 1000 if v else float("nan")  # noqa: E731
    return {"clients": clients, "requests": len(results), "output_tokens": sum(r["tokens"] for r in results),
            "wall_s": wall, "tok_s": sum(r["tokens"] for r in results) / wall,
            "ttft_p50_ms": q(ttft, 50), "ttft_p99_ms": q(ttft, 99), "itl_p50_ms": q(itl, 50), "itl_p99_ms": q(itl, 99)}


def serve(cmd: List[str], port: int, log: str):
    f = open(log, "w")
    proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
    except RuntimeError as e:
        proc.kill()
        f.close()
        with open(log) as g:
            tail = g.read()[-3000:]
        sys.exit(f"{' '.join(cmd)}: {e}\n{tail}")
    return proc, f


def stop(proc, f) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
    f.close()


def akunu_cmd(model: str, port: int, device: str, clients: int, n_ctx: int, batch_size: Optional[int]) -> List[str]:
    cmd = [sys.executable, "-m", "akunu.cli.serve", model, "--device", device, "--port", str(port),
           "--parallel", str(clients), "-c", str(n_ctx), "--max-queue", "1024"]
    return cmd + (["-b", str(batch_size)] if batch_size is not None else [])  # (akunu-serve checks the value)


def llama_cmd(bins: str, model: str, port: int, device: str, clients: int, n_ctx: int) -> List[str]:
    cmd = [os.path.join(bins, "llama-server"), "-m", model, "--port", str(port), "-np", str(clients),
           "-c", str(clients * n_ctx), "--cont-batching"]
    if device == "cuda":
        cmd += ["-ngl", "99", "-fa", "on"]
    return cmd


def copy_bandwidth(device: str) -> Optional[float]:
    """Bytes per second of a large device-to-device copy (torch), or None."""
    try:
        import torch
    except ImportError:
        return None
    if device != "cuda" or not torch.cuda.is_available():
        return None
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * 10 * a.numel() / (time.perf_counter() - t0)  # read + write


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--shapes", default="llama-3.2-1b")
    ap.add_argument("--formats", default="F16,Q4_K_M")
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--min-input", type=int, default=128)
    ap.add_argument("--max-input", type=int, default=2048)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--engines", default="akunu,llama.cpp")
    ap.add_argument("--akunu-batch-size", type=int, default=None, metavar="N",
                    help="akunu-serve -b N: tokens per forward pass (default: the device's; llama-server keeps "
                    "its own defaults, -b 2048 -ub 512)")
    ap.add_argument("--same-requests", action="store_true",
                    help="every level sends the largest level's requests (the 1-client row is then those "
                         "requests one after another)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--llama-cpp", metavar="SRC", help="llama.cpp sources to build llama-server from")
    src.add_argument("--llama-server", metavar="BIN_DIR", help="folder of prebuilt llama-server and llama-quantize")
    ap.add_argument("--cuda-arch", default="native")
    ap.add_argument("--models", default=os.path.join(common.CACHE, "models"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--generator", default="ours", choices=["ours", "guidellm"],
                    help="the load: this script's clients, or guidellm's (the same counts and lengths; prompts "
                         "of synthetic text through the model's tokenizer, lengths from a clipped normal)")
    ap.add_argument("--guidellm", default=shutil.which("guidellm"), help="the guidellm executable")
    a = ap.parse_args()
    if a.generator == "guidellm" and not a.guidellm:
        sys.exit("--generator guidellm: guidellm not found (pip install guidellm, or --guidellm PATH)")
    engines = a.engines.split(",")
    bins = None
    if a.llama_server:
        bins = a.llama_server
    elif "llama.cpp" in engines or a.formats != "F16":
        srcdir = a.llama_cpp or text_models.fetch_llama_cpp_sources(os.path.join(common.CACHE, "src"))
        bins = text_models.build_llama_cpp(srcdir, cuda=a.device == "cuda", cuda_arch=a.cuda_arch,
                                           targets=("llama-server", "llama-quantize"))
    bandwidth = copy_bandwidth(a.device)
    levels = [int(c) for c in a.clients.split(",")]
    n_ctx = a.max_input + a.max_tokens + 64
    rows = []
    for shape in a.shapes.split(","):
        vocab = text_models.SHAPES[shape][1]["vocab"]
        for fmt in a.formats.split(","):
            path = text_models.quantized_model(a.models, shape, fmt, bins)
            weight_bytes = os.path.getsize(path)
            work = os.path.join(common.CACHE, "guidellm", f"{shape}-{fmt}")
            if a.generator == "guidellm":
                guidellm_load.tokenizer_folder(path, os.path.join(work, "tokenizer"))
            for clients in levels:
                rng = np.random.default_rng(0)
                n_req = max((max(levels) if a.same_requests else clients) * a.requests_per_client, 4)
                prompts = [[int(t) for t in rng.integers(100, vocab - 100,
                                                         size=int(rng.integers(a.min_input, a.max_input + 1)))]
                           for _ in range(n_req)]
                ceiling = clients * bandwidth / weight_bytes if bandwidth else None
                for engine in engines:
                    port = free_port()
                    log = os.path.join(common.CACHE, f"serve-{engine}.log")
                    os.makedirs(common.CACHE, exist_ok=True)
                    if engine == "akunu":
                        cmd, extra = akunu_cmd(path, port, a.device, clients, n_ctx, a.akunu_batch_size), {}
                    else:
                        cmd, extra = llama_cmd(bins, path, port, a.device, clients, n_ctx), {"ignore_eos": True}
                    proc, f = serve(cmd, port, log)
                    try:
                        run_load(f"http://127.0.0.1:{port}", prompts[:2], min(clients, 2), 8, extra)  # warm-up
                        if a.generator == "guidellm":
                            r = guidellm_load.run(a.guidellm, f"http://127.0.0.1:{port}", os.path.join(work, "tokenizer"),
                                                  clients, n_req, (a.min_input + a.max_input) // 2, a.max_tokens,
                                                  work, a.min_input, a.max_input)
                        else:
                            r = run_load(f"http://127.0.0.1:{port}", prompts, clients, a.max_tokens, extra)
                    finally:
                        stop(proc, f)
                    r.update(engine=engine, shape=shape, format=fmt, ceiling_tok_s=ceiling, generator=a.generator)
                    rows.append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
    print(f"- Date / commit: {time.strftime('%Y-%m-%d')} / {common.commit()}")
    print(f"- Load generator: {a.generator}")
    print(f"- Command: `{common.command_line('bench.serving')}`\n")
    print("| model | format | clients | akunu tok/s | llama-server tok/s | ratio | ceiling | akunu TTFT p50/p99 ms "
          "| llama-server TTFT p50/p99 ms | akunu ITL p50/p99 ms | llama-server ITL p50/p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keyed = {(r["shape"], r["format"], r["clients"], r["engine"]): r for r in rows}
    for (shape, fmt, clients, engine), r in keyed.items():
        if engine != engines[0]:
            continue
        ak, ll = keyed.get((shape, fmt, clients, "akunu")), keyed.get((shape, fmt, clients, "llama.cpp"))
        cell = lambda x, k: f"{x[k]:.0f}" if x else "-"  # noqa: E731
        lat = lambda x, k: f"{x[k + '_p50_ms']:.0f} / {x[k + '_p99_ms']:.0f}" if x else "-"  # noqa: E731
        ratio = f"{ak['tok_s'] / ll['tok_s']:.2f}x" if ak and ll else "-"
        ceil = f"{r['ceiling_tok_s']:.0f}" if r.get("ceiling_tok_s") else "-"
        print(f"| {shape} | {fmt} | {clients} | {cell(ak, 'tok_s')} | {cell(ll, 'tok_s')} | {ratio} | {ceil} | "
              f"{lat(ak, 'ttft')} | {lat(ll, 'ttft')} | {lat(ak, 'itl')} | {lat(ll, 'itl')} |")
    print(f"\nrows: {common.save_json('serving', a.json, rows)}")


if __name__ == "__main__":
    main()
