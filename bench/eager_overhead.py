"""Per-op wall time of eager `add` on "tpu" (executable cache hit) against PyTorch's own CPU, in
one run. Small = 1 KiB, medium = 1 MiB of float32. Prints medians of several repeats and the ratio
(tpu / cpu: below 1 means tpu is faster)."""
import statistics
import time

import torch
import torch_pjrt

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
    print(f"eager add, per op (median of {REPEATS}), tpu = {torch_pjrt.plugin_info()['platform']}"
          " PJRT plugin, cache hit")
    print(f"{'size':<16}{'tpu us':>10}{'cpu us':>10}{'tpu/cpu':>10}")
    for label, tpu, cpu in rows:
        print(f"{label:<16}{tpu * 1e6:>10.1f}{cpu * 1e6:>10.1f}{tpu / cpu:>10.2f}")
    small = rows[0][1] * 1e6
    print(f"target: <= 20 us per small op on the cache-hit path: {small:.1f} us "
          f"({'met' if small <= 20 else 'NOT met'})")


if __name__ == "__main__":
    main()
