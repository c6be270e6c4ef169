"""Real models on tpu against PyTorch CPU at equal threads: a fixed sample from timm, torchvision
and Transformers (CNNs, ViT/Swin, a BERT and a Llama forward, the Llama's greedy generate), forward
in eval, tpu eager and tpu compiled (torch.compile(backend="tpu")) against CPU eager; with
--train, one training step (SGD) eager too. Random weights (the packages' architectures, built
offline); batch 1 at 224x224 for vision, 64 tokens for text.

Each model runs in a fresh process: warm-up passes first (compiles and shape-bucket settling
happen there, and the disk cache makes them cheap after the first run), then the median of
--repeats timed passes, each ended by torch.tpu.synchronize(). PyTorch runs with --threads
threads (default 1); XLA's CPU plugin runs each program on one compute thread here (its Eigen
pool for large matmuls and convolutions aside), so 1 is the equal count. Prints a table of
milliseconds per pass and tpu/cpu ratios (below 1: tpu faster), with the median and the worst.

    python bench/models.py [--models a,b,...] [--train] [--repeats N] [--threads T] [--json F]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# name -> (family, constructor expression, input kind)
MODELS = {
    "resnet18": ("torchvision", "torchvision.models.resnet18()", "image"),
    "resnet50": ("torchvision", "torchvision.models.resnet50()", "image"),
    "mobilenet_v2": ("torchvision", "torchvision.models.mobilenet_v2()", "image"),
    "mobilenet_v3_small": ("torchvision", "torchvision.models.mobilenet_v3_small()", "image"),
    "shufflenet_v2_x1_0": ("torchvision", "torchvision.models.shufflenet_v2_x1_0()", "image"),
    "squeezenet1_1": ("torchvision", "torchvision.models.squeezenet1_1()", "image"),
    "efficientnet_b0": ("torchvision", "torchvision.models.efficientnet_b0()", "image"),
    "regnet_y_400mf": ("torchvision", "torchvision.models.regnet_y_400mf()", "image"),
    "convnext_atto": ("timm", "timm.create_model('convnext_atto')", "image"),
    "efficientnet_lite0": ("timm", "timm.create_model('efficientnet_lite0')", "image"),
    "mobilenetv1_100": ("timm", "timm.create_model('mobilenetv1_100')", "image"),
    "ghostnet_100": ("timm", "timm.create_model('ghostnet_100')", "image"),
    "densenet121": ("timm", "timm.create_model('densenet121')", "image"),
    "vit_tiny": ("timm", "timm.create_model('vit_tiny_patch16_224')", "image"),
    "deit_small": ("timm", "timm.create_model('deit_small_patch16_224')", "image"),
    "swin_tiny": ("timm", "timm.create_model('swin_tiny_patch4_window7_224')", "image"),
    "swin_base": ("timm", "timm.create_model('swin_base_patch4_window7_224')", "image"),
    "levit_128s": ("timm", "timm.create_model('levit_128s')", "image"),
    "mobilevit_xxs": ("timm", "timm.create_model('mobilevit_xxs')", "image"),
    "focalnet_tiny": ("timm", "timm.create_model('focalnet_tiny_srf')", "image"),
    "bert_base": ("transformers", "transformers.BertModel(transformers.BertConfig())", "tokens"),
    "llama_135m": ("transformers", "transformers.LlamaForCausalLM(LLAMA)", "tokens"),
    "llama_135m_generate": ("transformers", "transformers.LlamaForCausalLM(LLAMA)", "generate"),
}
# SmolLM2-135M's shape (its weights are not on PyPI; the shape is what costs).
LLAMA = ("transformers.LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, "
         "num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, "
         "max_position_embeddings=2048, tie_word_embeddings=True)")

CHILD = r"""
import json, statistics, sys, time
import torch, torchvision, timm, transformers
torch.set_num_threads(@THREADS@)
torch.manual_seed(0)
LLAMA = @LLAMA@
kind, device, mode, warm, repeats, train = @KIND@, @DEVICE@, @MODE@, @WARM@, @REPEATS@, @TRAIN@
model = (@MODEL@).to(device)
model.train(train)
if kind == "image":
    x = torch.randn(1, 3, 224, 224, device=device)
else:
    x = torch.randint(1, 1000, (1, 64), device=device)
run = model
if mode == "compiled":
    run = torch.compile(model, backend="tpu" if device == "tpu" else "inductor")
opt = torch.optim.SGD(model.parameters(), lr=1e-3) if train else None

def one():
    if kind == "generate":
        with torch.no_grad():
            return model.generate(x[:, :16], max_new_tokens=16, min_new_tokens=16,
                                  do_sample=False, pad_token_id=0)
    if train:
        opt.zero_grad(set_to_none=True)
        out = run(x)
        out = out.logits if hasattr(out, "logits") else getattr(out, "last_hidden_state", out)
        out.float().pow(2).mean().backward()
        opt.step()
        return out
    with torch.no_grad():
        return run(x)

def sync():
    if device == "tpu":
        torch.tpu.synchronize()

for _ in range(warm):
    one()
sync()
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    one()
    sync()
    times.append(time.perf_counter() - t0)
print(json.dumps({"ms": statistics.median(times) * 1e3}))
"""


def run_child(name, device, mode, args):
    family, expr, kind = MODELS[name]
    code = CHILD
    for key, value in (("THREADS", args.threads), ("LLAMA", LLAMA), ("KIND", repr(kind)),
                       ("DEVICE", repr(device)), ("MODE", repr(mode)), ("WARM", args.warm),
                       ("REPEATS", args.repeats), ("TRAIN", args.train), ("MODEL", expr)):
        code = code.replace(f"@{key}@", str(value))
    env = dict(os.environ)
    if device == "cpu" and mode == "eager":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return None, (p.stderr.strip().splitlines() or ["failed"])[-1][:120]
    return json.loads(lines[-1])["ms"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="eager,compiled", help="tpu modes: eager,compiled")
    ap.add_argument("--train", action="store_true", help="one training step, not an eval forward")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {', '.join(MODELS)}")
    modes = [m for m in args.modes.split(",") if m]
    what = "training step" if args.train else "eval forward"
    print(f"{what}, ms per pass (median of {args.repeats}), PyTorch at {args.threads} thread(s)")
    header = f"{'model':22s} {'cpu':>9s}" + "".join(f" {'tpu ' + m:>13s} {'ratio':>6s}" for m in modes)
    print(header)
    rows = {}
    for name in names:
        if args.train and MODELS[name][2] == "generate":
            continue
        cpu, err = run_child(name, "cpu", "eager", args)
        row = {"cpu_ms": cpu, "error": err}
        line = f"{name:22s} {cpu if cpu else float('nan'):9.1f}"
        for m in modes:
            ms, e = (None, "cpu failed") if cpu is None else run_child(name, "tpu", m, args)
            row[m + "_ms"], row[m + "_error"] = ms, e
            ratio = ms / cpu if ms and cpu else None
            row[m + "_ratio"] = ratio
            line += f" {ms if ms else float('nan'):13.1f} {ratio if ratio else float('nan'):6.2f}"
            if e:
                line += f"  ({m}: {e})"
        rows[name] = row
        print(line, flush=True)
    for m in modes:
        ratios = [r[m + "_ratio"] for r in rows.values() if r.get(m + "_ratio")]
        if ratios:
            worst = max(rows, key=lambda n: rows[n].get(m + "_ratio") or 0)
            print(f"tpu {m}: median ratio {statistics.median(ratios):.2f}, worst "
                  f"{max(ratios):.2f} ({worst}), {len(ratios)} of {len(rows)} models")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "train": args.train, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
