"""Drive the CUDA sampler for Nsight Compute: python tools/ncu_sampler.py MODEL [top_p]"""
import sys

import akunu

m = akunu.load(sys.argv[1], device="cuda", n_ctx=256)
top_p = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
m.generate([1, 2, 3], max_tokens=24, temperature=0.8, top_p=top_p, seed=1,
           logit_bias={i: -float("inf") for i in m.stop_ids})
