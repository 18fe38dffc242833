"""Greedy vs sampled decode tok/s on CUDA (the sampler's cost): python tools/bench_cuda_sampling.py MODEL"""
import akunu, time, sys
m = akunu.load(sys.argv[1], device="cuda", n_ctx=1024)
ban = {i: -float("inf") for i in m.stop_ids}
def rate(**kw):
    rs = []
    for _ in range(3):
        m.reset(); t = time.perf_counter(); r = m.generate([1, 2, 3], max_tokens=128, logit_bias=ban, **kw)
        rs.append((len(r.tokens) - 1) / (time.perf_counter() - t - r.stats.prefill_seconds))
    return sum(rs) / len(rs)
g = rate()
s1 = rate(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1, seed=1)
s2 = rate(temperature=0.8, top_p=0.95, seed=1)
s3 = rate(temperature=0.8, seed=1)
print(f"greedy {g:.1f} tok/s; sampled top-k 40/top-p 0.95/min-p 0.05/repeat 1.1 {s1:.1f} ({s1/g:.2f}x); "
      f"top-p 0.95 {s2:.1f} ({s2/g:.2f}x); temperature only {s3:.1f} ({s3/g:.2f}x)")
