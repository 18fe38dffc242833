"""Where a CUDA decode step's time goes inside the real pipeline (graph
replay, programmatic launches), not kernel by kernel in isolation as
tools/ncu_decode.py measures: the kernels of a greedy generation traced by
torch.profiler (CUPTI, the process's whole CUDA context), then per kernel
(name and grid) its own duration and its share of the step, which is the
time from the end of the kernel before it to its own end. Those shares add
up to the decode time. A kernel that overlaps its predecessor under a
programmatic launch adds only what sticks out past it.

  python3 tools/trace_decode.py MODEL.gguf [TOKENS] [--json TRACE.json]

Needs torch with CUDA on the GPU machine (the device machine has it).
"""
import json
import os
import sys
import tempfile
from collections import defaultdict

from ncu_decode import kernel_name  # 'void akunu::...::gemv_multi_kernel<...>(...)' -> 'gemv_multi_kernel'


def kernel_events(path: str, tokens: int, trace_out: str) -> list:
    import torch
    from torch.profiler import ProfilerActivity, profile

    import akunu
    torch.zeros(1, device="cuda")  # the runtime's primary context, shared with akunu
    m = akunu.load(path, device="cuda", n_ctx=max(512, tokens + 64))
    m.generate("hello world", max_tokens=8)  # graphs captured, caches warm
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        m.generate("hello world", max_tokens=tokens)
    prof.export_chrome_trace(trace_out)
    with open(trace_out) as f:
        events = json.load(f)["traceEvents"]
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def report(kernels: list) -> None:
    per = defaultdict(lambda: [0, 0.0, 0.0])  # count, own us, share us
    prev_end = None
    for e in kernels:
        grid = e.get("args", {}).get("grid")
        name = kernel_name(e["name"]) + (f" grid {tuple(grid)}" if grid else "")
        start, end = e["ts"], e["ts"] + e["dur"]
        share = end - prev_end if prev_end is not None else e["dur"]
        prev_end = end if prev_end is None else max(prev_end, end)
        per[name][0] += 1
        per[name][1] += e["dur"]
        per[name][2] += max(share, 0.0)
    total = sum(v[2] for v in per.values())
    print(f"{len(kernels)} kernels, {total:.0f} us from the first kernel's start to the last one's end")
    print(f"{'kernel':60s} {'count':>6s} {'own us':>9s} {'share us':>9s} {'share/each':>10s} {'%':>6s}")
    for name, (n, own, share) in sorted(per.items(), key=lambda kv: -kv[1][2]):
        print(f"{name[:60]:60s} {n:6d} {own / n:9.2f} {share:9.0f} {share / n:10.2f} {100 * share / total:6.1f}")


def main() -> None:
    args = [a for a in sys.argv[1:]]
    trace_out = None
    if "--json" in args:
        i = args.index("--json")
        trace_out = args[i + 1]
        del args[i:i + 2]
    path = args[0]
    tokens = int(args[1]) if len(args) > 1 else 64
    if trace_out is None:
        trace_out = os.path.join(tempfile.mkdtemp(), "trace.json")
    kernels = kernel_events(path, tokens, trace_out)
    if not kernels:
        sys.exit("no kernels traced: is this torch's CUPTI able to see the akunu context?")
    report(kernels)


if __name__ == "__main__":
    main()
