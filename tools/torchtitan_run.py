"""TorchTitan on tpu, through its own entry point: the small data set and tokenizer it needs (its
wheel ships none), a seed checkpoint both devices start from, and runs of
`torchrun -m torchtitan.train` on tpu or CPU (torchtitan_train.py is each rank) read back as
losses, tokens/s and torch_pjrt's fallback report. tests/python/test_torchtitan.py uses it for
short runs; as a script it is the long run (`make titan`): the llama3 debug model for --steps
steps on 2 processes, tpu eager, tpu compiled (--compile.enable) and CPU eager, in one table:
losses along the way, where each run parts from the first, tokens/s.

    python tools/torchtitan_run.py [--steps 300] [--nproc 2] [--seq-len 64] [--batch 2] [--runs ...]
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchtitan_train.py")
MODEL = ["--module", "llama3", "--config", "llama3_debugmodel", "--validator.no-enable",
         "--metrics.log-freq", "1"]
STEP_LINE = re.compile(r"step:\s*(\d+)\s+loss:\s*([0-9.eE+-]+|nan|inf)\s+grad_norm:\s*([0-9.eE+-]+)"
                       r"\s+memory:.*?tps:\s*([0-9,]+).*?mfu:")


RUNS = [("tpu eager", "tpu", []), ("tpu compiled", "tpu", ["--compile.enable"]),
        ("cpu eager", "cpu", [])]
# No compiled CPU run: TorchTitan sends FlexAttention regions to Inductor under every compile
# backend it accepts (inductor, aot_eager), and Inductor fails on them on CPU (IndexError in a
# lowering, torch 2.15).


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(workdir, device, nproc, *args, timeout=600):
    """Runs TorchTitan's training on |device| ("tpu" or "cpu") with |nproc| ranks in |workdir|;
    returns ({step: (loss, grad_norm, tokens_per_s)}, rank 0's torch_pjrt report (tpu) or None,
    the output). Raises AssertionError with the output's tail when it fails."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TORCH_PJRT_QUIET_FALLBACK="1")
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), HARNESS, device,
           *MODEL, *args]
    p = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout + p.stderr)
    assert p.returncode == 0, f"TorchTitan on {device} exited {p.returncode}:\n{out[-4000:]}"
    steps = {int(m[1]): (float(m[2]), float(m[3]), float(m[4].replace(",", "")))
             for m in STEP_LINE.finditer(out)}
    reports = [json.loads(l) for l in p.stdout.splitlines() if l.startswith('{"fallbacks"')]
    return steps, (reports[0] if reports else None), out


def make_workdir(root, seq_len=64, batch=2):
    """Writes tests/assets/{c4_test,tokenizer} into |root| (a text set in the layout of TorchTitan's
    c4_test, a byte-level BPE tokenizer in Hugging Face's format) and TorchTitan's own seed
    checkpoint (--checkpoint.create-seed-checkpoint, on CPU) under root/seed; returns the seed
    checkpoint's folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    data = os.path.join(root, "tests", "assets", "c4_test")
    tok_dir = os.path.join(root, "tests", "assets", "tokenizer")
    os.makedirs(data, exist_ok=True)
    os.makedirs(tok_dir, exist_ok=True)
    words = ("the a cat dog sat on mat ran fast slow red blue tree house river stone light dark "
             "and or but with").split()
    lines = [" ".join(words[(i * 7 + j * 3 + i * j) % len(words)] for j in range(20 + i % 40)) + "."
             for i in range(400)]
    with open(os.path.join(data, "train.json"), "w") as f:
        f.writelines(json.dumps({"text": line}) + "\n" for line in lines)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=256, special_tokens=["<unk>", "<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                   "add_bos_token": True}, f)
    train(root, "cpu", 1, "--training.steps", "1", "--training.seq-len", str(seq_len),
          "--training.local-batch-size", str(batch), "--checkpoint.enable",
          "--checkpoint.create-seed-checkpoint", "--parallelism.data-parallel-shard-degree", "1",
          "--dump-folder", "seed")
    seed = os.path.join(root, "seed", "checkpoint", "step-0")
    assert os.path.exists(os.path.join(seed, ".metadata")), "no seed checkpoint was written"
    return seed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--runs", default=",".join(n for n, _, _ in RUNS),
                    help="which of the runs, comma-separated (the first is the others' reference)")
    ap.add_argument("--json", help="also write every run's per-step losses to this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        seed = make_workdir(root, args.seq_len, args.batch)
        common = ["--training.steps", str(args.steps), "--training.seq-len", str(args.seq_len),
                  "--training.local-batch-size", str(args.batch), "--checkpoint.enable",
                  "--checkpoint.interval", str(10 ** 6), "--checkpoint.initial-load-path", seed]
        runs = [r for n in args.runs.split(",") for r in RUNS if r[0] == n]
        rows = []
        for name, device, extra in runs:
            try:
                steps, report, _ = train(root, device, args.nproc, *common, *extra,
                                         "--dump-folder", name.replace(" ", "_"), timeout=6 * 3600)
            except AssertionError as e:  # one failed run: the others still make the table
                print(f"{name}: failed\n{str(e)[-2000:]}", flush=True)
                continue
            warm = [s for s in sorted(steps) if s > min(5, args.steps // 2)]
            tps = statistics.median(steps[s][2] for s in warm) if warm else float("nan")
            rows.append((name, steps, tps, report["fallbacks"] if report else "-",
                         report["collectives"] if report else "-"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {s: v[0] for s, v in steps.items()} for name, steps, *_ in rows}, f)
    print(f"TorchTitan llama3 debug model, {args.steps} steps, {args.nproc} processes, seq_len "
          f"{args.seq_len}, local batch {args.batch}, from one seed checkpoint")
    marks = sorted({s for s in (1, 10, 30, 100, 200, args.steps) if s <= args.steps})
    print(f"{'run':<13} " + " ".join(f"{'loss@' + str(s):>9}" for s in marks)
          + f" {'tokens/s':>9}  fallbacks; collectives")
    for name, steps, tps, fb, coll in rows:
        print(f"{name:<13} " + " ".join(f"{steps[s][0]:9.4f}" if s in steps else f"{'-':>9}"
                                        for s in marks) + f" {tps:9.0f}  {fb}; {coll}")
    # Where the runs part: the first step whose loss differs from the first run's by over 1%.
    for name, steps, *_ in rows[1:]:
        ref = rows[0][1]
        apart = [s for s in sorted(steps) if s in ref and abs(steps[s][0] - ref[s][0]) > 0.01 * abs(ref[s][0])]
        print(f"{name} against {rows[0][0]}: losses within 1% up to step "
              f"{(apart[0] - 1) if apart else max(steps)}")
    cpu = [t for n, _, t, _, _ in rows if n == "cpu eager"]
    if cpu:
        print("tokens/s against CPU eager: " + ", ".join(f"{n} {t / cpu[0]:.2f}x" for n, _, t, _, _ in rows
                                                        if n != "cpu eager"))


if __name__ == "__main__":
    main()
