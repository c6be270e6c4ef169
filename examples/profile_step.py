"""Profile a training step on the "tpu" device with torch.profiler, eager and compiled.

Exactly what a CUDA user writes, with the device activity named PrivateUse1 (PyTorch's name for
an out-of-tree device). For each mode it prints the ops that spent the most device time, and it
writes Chrome traces (open them in https://ui.perfetto.dev or chrome://tracing): the host
threads on top, one track per tpu device below, arrows from each op to the program it ran.

    python examples/profile_step.py [--steps N] [--out DIR]
"""
import argparse
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function

import torch_pjrt  # noqa: F401  (PyTorch imports it too; here for clarity)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
    ).to("tpu")


def profile_mode(name, step, x, y, steps, out_dir):
    for _ in range(2):  # compile outside the profile (a first call would show its compiles)
        step(x, y)
    torch.tpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                 profile_memory=True, record_shapes=True) as prof:
        for _ in range(steps):
            with record_function(f"{name} step"):
                step(x, y)
        torch.tpu.synchronize()
    print(f"\n=== {name}: top ops by device time ({steps} steps) ===")
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=10))
    path = os.path.join(out_dir, f"profile_{name}.json")
    prof.export_chrome_trace(path)
    print(f"trace: {path}")
    return prof


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()

    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 3, 32, 32, device="tpu")
    y = torch.randint(0, 10, (32,), device="tpu")

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    profile_mode("eager", train_step, x, y, args.steps, args.out)
    profile_mode("compiled", torch.compile(train_step, backend="tpu"), x, y, args.steps, args.out)


if __name__ == "__main__":
    main()
