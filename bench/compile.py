"""torch.compile(backend="tpu") against its peers, measured in one run.

A small decoder-only transformer (embedding, 2 pre-norm blocks with causal SDPA and a GELU MLP,
tied head) in two workloads, and a small CNN in a third:
  train: forward + cross-entropy + backward + AdamW step
  infer: forward under torch.no_grad
  cnn_train: the same training step for 3 conv-batchnorm-ReLU stages and a linear head
each on five engines: "tpu" eager, "tpu" fused eager (each step in torch_pjrt.fused()), "tpu"
compiled (model and optimizer step), PyTorch CPU eager, PyTorch CPU torch.compile (Inductor). Prints steps/s (median of --reps timed rounds after warm-up,
the engines' rounds interleaved) and the ratios between them. PyTorch runs at --threads threads
(default 1, the CPU plugin's compute threads): on a shared 2-core machine PyTorch's 2-thread path
collapses whenever another process runs, and ratios taken so cannot be repeated.

    python bench/compile.py [--steps 20] [--reps 5] [--quick]
"""
import argparse
import copy
import ctypes
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_pjrt
import torch_pjrt.compile as tpu_compile


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()


class SmallCNN(nn.Module):
    def __init__(self, width=32, classes=10):
        super().__init__()
        layers, c = [], 3
        for w in (width, 2 * width, 4 * width):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                       nn.MaxPool2d(2)]
            c = w
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


def make_engine(name, base, device):
    model = copy.deepcopy(base).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    backend = {"tpu compiled": "tpu", "cpu inductor": "inductor"}.get(name)
    fwd = torch.compile(model, backend=backend) if backend else model
    opt_step = torch.compile(opt.step, backend=backend) if backend else opt.step

    def train(idx, tgt):
        logits = fwd(idx)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        return loss

    def infer(idx, tgt):
        with torch.no_grad():
            return fwd(idx)

    if name == "tpu fused":
        def fused(fn):
            def step(*args):
                with torch_pjrt.fused():
                    return fn(*args)
            step.__wrapped__ = fn
            return step
        return {"train": fused(train), "infer": fused(infer)}
    return {"train": train, "infer": infer}


def _c_getenv(name):
    """The C environment's value (torch-pjrt may set PJRT_NPROC after os.environ was copied)."""
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    v = getenv(name.encode())
    return v.decode() if v else "unset"


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def warm(fn, args, device):
    fn(*args)  # compile / warm up (twice: a first optimizer step builds its state)
    fn(*args)
    sync(device)


def timed_round(fn, args, device, steps):
    """Steps per second over one round of |steps| steps, ended by reading the last result."""
    t0 = time.perf_counter()
    for _ in range(steps):
        out = fn(*args)
    if device == "tpu":
        out.cpu()
    return steps / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="steps per timed round")
    p.add_argument("--reps", type=int, default=5, help="timed rounds (median reported)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    p.add_argument("--threads", type=int, default=1,
                   help="PyTorch CPU threads (default 1: XLA's CPU plugin runs a program on one "
                        "compute thread, so 1 is the equal count)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = dict(vocab=128, d=32, heads=2, layers=1, seq=16) if a.quick else {}
    base = TinyLM(**cfg)
    seq = cfg.get("seq", 32)
    vocab = cfg.get("vocab", 256)
    idx = torch.randint(0, vocab, (a.batch, seq))
    tgt = torch.randint(0, vocab, (a.batch, seq))
    cnn = SmallCNN(**({"width": 8} if a.quick else {}))
    images = torch.randn(a.batch, 3, 32, 32)
    labels = torch.randint(0, 10, (a.batch,))
    engines = ["tpu eager", "tpu fused", "tpu compiled", "cpu eager", "cpu inductor"]
    works = ("train", "infer", "cnn_train")
    runs = {}
    for eng in engines:
        device = "tpu" if eng.startswith("tpu") else "cpu"
        e = make_engine(eng, base, device)
        args = (idx.to(device), tgt.to(device))
        for work in ("train", "infer"):
            warm(e[work], args, device)
            runs[(eng, work)] = (e[work], args, device)
        fn = make_engine(eng, cnn, device)["train"]
        args = (images.to(device), labels.to(device))
        warm(fn, args, device)
        runs[(eng, "cnn_train")] = (fn, args, device)
    # Rounds interleave the engines: a busy moment on the shared machine slows one round of
    # each, not every round of one engine.
    before = torch_pjrt.stats()
    rates = {k: [] for k in runs}
    for _ in range(a.reps):
        for k, (fn, args, device) in runs.items():
            rates[k].append(timed_round(fn, args, device, a.steps))
    results = {k: statistics.median(v) for k, v in rates.items()}
    for (eng, work), r in results.items():
        print(f"  {eng:13s} {work}: {r:8.1f} steps/s", flush=True)
    print()
    print(f"TinyLM batch {a.batch} x {seq} tokens, SmallCNN batch {a.batch} x 3x32x32; steps/s, "
          f"median of {a.reps} rounds of {a.steps} steps; PyTorch CPU threads: "
          f"{torch.get_num_threads()}; XLA CPU compute threads (PJRT_NPROC): {_c_getenv('PJRT_NPROC')}")
    print("| workload | tpu eager | tpu fused | tpu compiled | cpu eager | cpu inductor | "
          "fused/eager | fused/compiled | compiled/eager | compiled/cpu eager | compiled/inductor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for work in works:
        r = {eng: results[(eng, work)] for eng in engines}
        print(f"| {work} | {r['tpu eager']:.1f} | {r['tpu fused']:.1f} | {r['tpu compiled']:.1f} | "
              f"{r['cpu eager']:.1f} | {r['cpu inductor']:.1f} | "
              f"{r['tpu fused'] / r['tpu eager']:.2f}x | {r['tpu fused'] / r['tpu compiled']:.2f}x | "
              f"{r['tpu compiled'] / r['tpu eager']:.2f}x | "
              f"{r['tpu compiled'] / r['cpu eager']:.2f}x | "
              f"{r['tpu compiled'] / r['cpu inductor']:.2f}x |")
    s = tpu_compile.stats()
    print(f"\ntpu backend: {s['graphs']} graphs, {s['partitions']} partitions, splits "
          f"{s['splits'] or 'none'}, {s['graph_compiles']} graph programs compiled, "
          f"{s['graph_runs']} graph runs; fallbacks {torch_pjrt.stats()['fallbacks'] or 'none'}")
    t = {k: v - before[k] for k, v in torch_pjrt.stats().items() if k.startswith("fused_")}
    print(f"fused eager, timed rounds: {t['fused_regions']} regions of {t['fused_ops']} ops, "
          f"{t['fused_compiles']} compiled, {t['fused_cache_hits']} cache hits")


if __name__ == "__main__":
    main()
