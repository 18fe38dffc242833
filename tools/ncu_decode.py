"""GPU time of each kernel of one CUDA decode step (or of one prefill pass),
from Nsight Compute (kernel durations alone, no launch gaps), and the DRAM
bytes each kernel group read per second of its time: where the time goes.

  python -m tools.ncu_decode MODEL.gguf [POSITION]            # decode step at POSITION (runs ncu on itself)
  python -m tools.ncu_decode MODEL.gguf TOKENS --prefill      # one prefill pass of TOKENS tokens

Needs Nsight Compute (ncu) on PATH and akunu built with its CUDA backend.
"""
import csv
import io
import os
import subprocess
import sys
from collections import defaultdict

# The decode step's kernels (prefill runs other ones, or rmsnorm, left out here).
DECODE_KERNELS = ("regex:gemv_multi|gemv_gate_round|gemv_residual_round|gemv_kernel|gemv_q8_kernel|quantize_q8|attention_decode|qk_rope_kv|embedding|argmax|"
                  "add_kernel|rope_kernel")


def step(path: str, position: int, prefill: bool) -> None:
    import akunu
    m = akunu.load(path, device="cuda", n_ctx=max(256, position + 8))
    core = m._core()
    core.prefill([1] * position)
    if not prefill:
        # ncu runs with --profile-from-start off: only the decode step's kernels
        import ctypes
        if ctypes.CDLL("libcuda.so.1").cuProfilerStart() != 0:
            sys.exit("cuProfilerStart failed: no CUDA context on this thread?")
        core.decode_logits(2)


def kernel_name(full: str) -> str:
    """'void akunu::<unnamed>::gemv_multi_kernel<(bool)1, 1, ...>(...)' -> 'gemv_multi_kernel':
    template arguments dropped (whatever they hold), the parameter list and namespaces cut."""
    text = full.replace("(anonymous namespace)", "anon").replace("void ", "")
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    return "".join(out).split("::")[-1]


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    args = [a for a in sys.argv[1:] if a != "--prefill"]
    prefill = "--prefill" in sys.argv
    path, pos = args[0], int(args[1]) if len(args) > 1 else 128
    if os.environ.get("AKUNU_NCU_CHILD"):
        step(path, pos, prefill)
        return
    # warm caches and boost clocks, as in a real decode step (ncu's defaults flush and lock)
    select = ["-k", DECODE_KERNELS, "--profile-from-start", "off"] if not prefill else []
    out = subprocess.run(["ncu", "--cache-control", "none", "--clock-control", "none",
                          "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size", "--csv", *select,
                          sys.executable, __file__, *sys.argv[1:]], capture_output=True, text=True,
                         env={**os.environ, "AKUNU_NCU_CHILD": "1"})
    rows = list(csv.DictReader(io.StringIO(out.stdout[out.stdout.find('"ID"'):])))
    if not any(r.get("Metric Name") == "gpu__time_duration.sum" for r in rows):
        sys.exit(out.stdout[-2000:] + out.stderr[-2000:])
    time_scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    byte_scale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    grids = {r["ID"]: r["Metric Value"] for r in rows if r["Metric Name"] == "launch__grid_size"}
    per = defaultdict(lambda: [0, 0.0, 0.0])  # kernels, us, DRAM bytes read
    for r in rows:
        name = kernel_name(r["Kernel Name"])
        if name.startswith("gemv") and grids.get(r["ID"]):  # projections apart by their grids
            name += f" grid {grids[r['ID']]}"
        value = float(r["Metric Value"].replace(",", ""))
        if r["Metric Name"] == "gpu__time_duration.sum":
            per[name][0] += 1
            per[name][1] += value * time_scale[r["Metric Unit"]]
        elif r["Metric Name"] == "dram__bytes_read.sum":
            per[name][2] += value * byte_scale.get(r["Metric Unit"], 1.0)
    total = sum(v[1] for v in per.values())
    what = f"one {pos}-token prefill" if prefill else f"one decode step at position {pos}"
    print(f"{os.path.basename(path)}: {what}, kernel time alone (ncu)")
    for name, (n, us, b) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:40s} {n:5d} {us:9.1f} us {us / n:7.2f} us each {100 * us / total:5.1f}% "
              f"{b / us / 1e3:7.0f} GB/s DRAM read")
    print(f"{'total':40s} {sum(v[0] for v in per.values()):5d} {total:9.1f} us "
          f"{sum(v[2] for v in per.values()) / total / 1e3:7.0f} GB/s DRAM read")


if __name__ == "__main__":
    main()
