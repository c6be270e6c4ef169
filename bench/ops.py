"""Representative native ops at two sizes, executable-cache hit, against the CPU fallback of the
same op (what the backend would do without the lowering: copy to host, run PyTorch's CPU kernel,
copy back) and against plain PyTorch CPU eager, in one run. Medians of several repeats."""
import statistics
import time

import torch
import torch.nn.functional as F
import torch_pjrt

REPEATS = 5

OPS = {
    "add": lambda x, i: x + x,
    "mul scalar": lambda x, i: x * 0.5,
    "exp": lambda x, i: torch.exp(x),
    "sum dim": lambda x, i: x.sum(1),
    "mm": lambda x, i: x @ x,
    "softmax": lambda x, i: F.softmax(x, -1),
    "layer_norm": lambda x, i: F.layer_norm(x, x.shape[-1:]),
    "index_select": lambda x, i: x.index_select(0, i),
}


def timed(fn, n, sync):
    fn()
    sync()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def main():
    print(f"per-op time in us (median of {REPEATS}); tpu = {torch_pjrt.plugin_info()['platform']} "
          "PJRT plugin")
    print(f"{'op':<14}{'size':>10}{'tpu native':>12}{'fallback':>10}{'cpu eager':>11}"
          f"{'native/fallback':>17}")
    worst = 0.0
    for size, n in ((64, 200), (512, 20)):
        x = torch.randn(size, size)
        idx = torch.randint(0, size, (size // 2,))
        tx, tidx = x.to("tpu"), idx.to("tpu")
        for name, op in OPS.items():
            torch_pjrt.reset_stats()
            native = timed(lambda: op(tx, tidx), n, torch.tpu.synchronize)
            assert not torch_pjrt.stats()["fallbacks"], (name, torch_pjrt.stats()["fallbacks"])
            fallback = timed(lambda: op(tx.cpu(), tidx.cpu()).to("tpu"), n, torch.tpu.synchronize)
            cpu = timed(lambda: op(x, idx), n, lambda: None)
            ratio = native / fallback
            worst = max(worst, ratio)
            print(f"{name:<14}{f'{size}x{size}':>10}{native * 1e6:>12.1f}{fallback * 1e6:>10.1f}"
                  f"{cpu * 1e6:>11.1f}{ratio:>17.2f}")
    print(f"slowest native op relative to its fallback: {worst:.2f}x "
          f"({'no native op is slower' if worst <= 1 else 'SOME native op is slower'})")


if __name__ == "__main__":
    main()
