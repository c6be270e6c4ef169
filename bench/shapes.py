"""Changing shapes: what a sweep over new shapes costs on tpu, cold cache, against PyTorch CPU.

Each sweep runs in a fresh process with the disk cache off, twice over the same shapes: the first
pass compiles what it needs, the second should only hit the cache. Printed per sweep: programs
compiled in the first pass (every program, and how many of them were compiled graphs), the median
compile time of a program, the first and second pass, the programs the second pass compiled, for
the model sweeps the programs compiled by 5 prompt lengths never seen but inside warm buckets
(NEW_LENGTHS, after the two passes: what a new prompt costs once warm), and PyTorch CPU over the
same sweep (eager; Inductor for the compiled sweep, its second pass).

  eval     nn.TransformerEncoderLayer(32, 4), batch 2, eval/no_grad, sequence lengths 1..64
  train    the same layer, forward and backward, lengths 1..16
  generate a tiny Llama's generate(), 8 prompt lengths, 16 new tokens each, dynamic cache
  static   the same with cache_implementation="static" (transformers compiles the decode step
           for tpu with dynamic=False: a static graph per cache length)
  static_max      the static cache with max_cache_len=64 (transformers' setting that sizes it for
           the worst case: one cache length, so one static decode graph)
  static_dynamic  the same with compile_config=CompileConfig(backend="tpu", dynamic=None):
           Dynamo's automatic dynamic shapes, so the decode graph is bucketed
  compiled the tiny Llama's forward under torch.compile(backend="tpu"), 8 prompt lengths

    python bench/shapes.py [--sweeps eval,train,generate,static,static_max,static_dynamic,compiled]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

SWEEPS = ("eval", "train", "generate", "static", "static_max", "static_dynamic", "compiled")
LENGTHS = [5, 7, 9, 12, 16, 21, 27, 33]  # the 8 prompt lengths
NEW_LENGTHS = [6, 10, 14, 20, 30]  # after the two passes: lengths never seen, in warm buckets


def _layer():
    import torch
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)
    return torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)


def _llama():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg).eval()


def _sweep(name, device):
    """The sweep |name| on |device|: returns a function running one pass (a model sweep: over
    the given prompt lengths, LENGTHS by default)."""
    import torch
    if name in ("eval", "train"):
        layer = _layer().to(device)
        if name == "eval":
            layer.eval()

            def run():
                with torch.no_grad():
                    for n in range(1, 65):
                        y = layer(torch.ones(2, n, 32, device=device) * 0.1)
                return y.cpu()  # waits for the work, compiles nothing
        else:
            def run():
                for n in range(1, 17):
                    x = (torch.ones(2, n, 32, device=device) * 0.1).requires_grad_()
                    layer(x).sum().backward()
                return x.grad.cpu()
        return run
    lm = _llama().to(device)

    def prompts(lengths):
        return [torch.arange(1, n + 1, device=device).remainder(120).unsqueeze(0) for n in lengths]
    if name in ("generate", "static", "static_max", "static_dynamic"):
        extra = {"cache_implementation": "static"} if name.startswith("static") else {}
        if name == "static_max":
            extra["max_cache_len"] = 64
        if name == "static_dynamic":
            from transformers import CompileConfig
            extra["compile_config"] = CompileConfig(backend="tpu", dynamic=None, mode="default")

        def run(lengths=LENGTHS):  # each output read back, as a user reads it
            with torch.no_grad():
                return [lm.generate(p, max_new_tokens=16, min_new_tokens=16, do_sample=False,
                                    pad_token_id=0, **extra).cpu() for p in prompts(lengths)]
        return run
    fwd = torch.compile(lm, backend="tpu" if device == "tpu" else "inductor")

    def run(lengths=LENGTHS):
        with torch.no_grad():
            return [fwd(p).logits.cpu() for p in prompts(lengths)]
    return run


def _child(name, device):
    import torch
    import torch_pjrt
    run = _sweep(name, device)
    torch_pjrt.reset_stats()
    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    s = torch_pjrt.stats()
    t = time.perf_counter()
    run()
    second = time.perf_counter() - t
    s2 = torch_pjrt.stats()
    new = -1
    if name not in ("eval", "train"):  # prompt lengths never seen, inside warm buckets
        run(NEW_LENGTHS)
        new = torch_pjrt.stats()["compiles"] - s2["compiles"]
    print(json.dumps({"first": first, "second": second, "compiles": s["compiles"],
                      "graph_compiles": s["graph_compiles"], "compile_s": s["compile_seconds"],
                      "new_shape": s["compiles_new_shape"],
                      "second_compiles": s2["compiles"] - s["compiles"], "new_compiles": new}))


def _cpu(name):
    import torch
    run = _sweep(name, "cpu")
    if name == "compiled":  # Inductor compiles on the first pass: time the second
        run()
    t = time.perf_counter()
    run()
    print(json.dumps({"cpu": time.perf_counter() - t}))


def _spawn(*argv):
    """Runs this script with |argv| in a fresh process, disk cache off, compiles logged: its
    JSON line, with the median compile time of the logged compiles."""
    env = dict(os.environ, TORCH_PJRT_CACHE_DIR="", TORCH_PJRT_QUIET_FALLBACK="1",
               TORCH_PJRT_LOG_COMPILES="1")
    p = subprocess.run([sys.executable, __file__, *argv], env=env, capture_output=True, text=True,
                       timeout=3600)
    if p.returncode:
        raise SystemExit(f"{argv} failed:\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    ms = [float(m) for m in re.findall(r"^torch_pjrt: compile .*, ([0-9.]+) ms$", p.stderr, re.M)]
    out["median_ms"] = statistics.median(ms) if ms else 0.0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", default=",".join(SWEEPS))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--cpu", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(*args.child)
    if args.cpu:
        return _cpu(args.cpu)
    print("sweep          compiles  graphs  median ms  first s  second s  2nd compiles  new-length compiles  cpu s  first/cpu")
    for name in args.sweeps.split(","):
        r = _spawn("--child", name, "tpu")
        c = _spawn("--cpu", name)
        print(f"{name:<14} {r['compiles']:8d} {r['graph_compiles']:7d} {r['median_ms']:11.1f} {r['first']:8.2f} "
              f"{r['second']:9.2f} {r['second_compiles']:13d} "
              f"{'-' if r['new_compiles'] < 0 else r['new_compiles']:>20} {c['cpu']:6.2f} "
              f"{r['first'] / c['cpu']:10.1f}",
              flush=True)


if __name__ == "__main__":
    main()
