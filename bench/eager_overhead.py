"""Per-op wall time of eager `add` on "tpu" (executable cache hit) against PyTorch's own CPU, in
one run. Small = 1 KiB, medium = 1 MiB of float32. Prints medians of several repeats and the ratio
(tpu / cpu: below 1 means tpu is faster).

With it, the floor a tpu op cannot go under, measured in the same run: the plugin's own execute
call (the median `tpu::execute` span torch.profiler records around PJRT_LoadedExecutable_Execute
for the same small add) plus PyTorch's dispatch of a small op (CPU's whole small add, which
includes its output's allocation), and what this package adds above that floor.

Then what shape buckets cost a loop whose shapes never change: a training step of
nn.TransformerEncoderLayer(64, 4, 128) on a fixed 8 x 32 x 64 batch (SGD), tpu eager, in child
processes with TORCH_PJRT_SHAPE_BUCKETS=off and with the default, alternating, PyTorch at 1
thread; the median steps/s of each, their ratio (target >= 0.95) and the bucketed calls per step
after warm-up (target 0)."""
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch_pjrt
from torch.profiler import ProfilerActivity, profile

REPEATS = 7


def per_op_seconds(a, b, n, sync):
    c = a + b  # warm: compile once, then cache hits only
    sync()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(n):
            c = a + b
        sync()
        times.append((time.perf_counter() - t0) / n)
    del c
    return statistics.median(times)


def execute_span_seconds(a, b, n=2000):
    """The median host span of PJRT's execute call for `a + b` (a cache hit), as the profiler's
    tpu::execute events record it."""
    c = a + b
    torch.tpu.synchronize()
    with profile(activities=[ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(n):
            c = a + b
        torch.tpu.synchronize()
    del c
    spans = [e.time_range.end - e.time_range.start for e in prof.events() if e.name == "tpu::execute"]
    assert len(spans) >= n, f"expected {n} tpu::execute events, got {len(spans)}"
    return statistics.median(spans) * 1e-6


def main():
    rows = []
    for label, numel, n in (("small (1 KiB)", 256, 2000), ("medium (1 MiB)", 262144, 200)):
        a, b = torch.randn(numel), torch.randn(numel)
        cpu = per_op_seconds(a, b, n, lambda: None)
        ta, tb = a.to("tpu"), b.to("tpu")
        torch_pjrt.reset_stats()
        tpu = per_op_seconds(ta, tb, n, torch.tpu.synchronize)
        s = torch_pjrt.stats()
        assert s["compiles"] <= 1 and not s["fallbacks"], s
        rows.append((label, tpu, cpu))
        if numel == 256:
            execute = execute_span_seconds(ta, tb)
    print(f"eager add, per op (median of {REPEATS}), tpu = {torch_pjrt.plugin_info()['platform']}"
          " PJRT plugin, cache hit")
    print(f"{'size':<16}{'tpu us':>10}{'cpu us':>10}{'tpu/cpu':>10}")
    for label, tpu, cpu in rows:
        print(f"{label:<16}{tpu * 1e6:>10.1f}{cpu * 1e6:>10.1f}{tpu / cpu:>10.2f}")
    small, cpu_small = rows[0][1] * 1e6, rows[0][2] * 1e6
    floor = execute * 1e6 + cpu_small
    print(f"floor of a small tpu op: PJRT execute {execute * 1e6:.1f} us (median tpu::execute span)"
          f" + PyTorch's dispatch {cpu_small:.1f} us (CPU's small add) = {floor:.1f} us; "
          f"this package above it: {small - floor:.1f} us")
    print(f"target: <= 3.5 us per small op on the cache-hit path: {small:.1f} us "
          f"({'met' if small <= 3.5 else 'NOT met'})")


_TRAIN_STEP = """
import json, time, torch, torch_pjrt
torch.set_num_threads(1)
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).to("tpu")
opt = torch.optim.SGD(layer.parameters(), lr=0.01)
x = torch.randn(8, 32, 64).to("tpu")
def step():
    loss = layer(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
for _ in range(3):
    step()
torch.tpu.synchronize()
torch_pjrt.reset_stats()
n = 100
t0 = time.perf_counter()
for _ in range(n):
    step()
torch.tpu.synchronize()
rate = n / (time.perf_counter() - t0)
print(json.dumps({"steps_per_s": rate, "bucketed_calls": torch_pjrt.stats()["bucketed_calls"] / n}))
"""


def train_step(policy):
    env = dict(os.environ, TORCH_PJRT_SHAPE_BUCKETS=policy, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _TRAIN_STEP], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def buckets_on_a_fixed_loop(runs=3):
    got = {"off": [], "pow2": []}
    for _ in range(runs):  # alternating, so a busy moment hurts both
        for policy in got:
            got[policy].append(train_step(policy))
    rate = {p: statistics.median(r["steps_per_s"] for r in v) for p, v in got.items()}
    calls = max(r["bucketed_calls"] for r in got["pow2"])
    print(f"\nfixed-shape training step (TransformerEncoderLayer(64, 4, 128), 8 x 32 x 64, SGD), "
          f"median of {runs} runs each, PyTorch at 1 thread")
    print(f"{'buckets':<10}{'steps/s':>10}")
    for p in got:
        print(f"{p:<10}{rate[p]:>10.1f}")
    ratio = rate["pow2"] / rate["off"]
    print(f"default/off: {ratio:.2f} (target >= 0.95: {'met' if ratio >= 0.95 else 'NOT met'}); "
          f"bucketed calls per step after warm-up: {calls:g} (target 0)")


if __name__ == "__main__":
    main()
    buckets_on_a_fixed_loop()
