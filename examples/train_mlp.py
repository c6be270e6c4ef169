"""`make demo`: train a small MLP on synthetic data on the "tpu" device.

The script is plain PyTorch; only the device string says "tpu". It prints the loss going down,
steps per second, and the backend's compile/cache statistics and fallback report.
"""
import time

import torch
import torch_pjrt

STEPS = 300


def main():
    torch.manual_seed(0)
    device = "tpu"
    info = torch_pjrt.plugin_info()
    print(f"device: {device} -> {info['platform']} ({', '.join(info['devices'])}), "
          f"PJRT API {info['pjrt_api_version'][0]}.{info['pjrt_api_version'][1]}")

    # A synthetic regression task: y = sin-ish nonlinear function of x.
    x = torch.randn(512, 16)
    w_true = torch.randn(16, 1)
    y = torch.tanh(x @ w_true) + 0.1 * x[:, :1]
    x, y = x.to(device), y.to(device)

    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 1),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.0, foreach=False)

    torch_pjrt.reset_stats()
    t0 = time.perf_counter()
    first = None
    for step in range(1, STEPS + 1):
        opt.zero_grad()
        pred = model(x)
        diff = pred - y
        loss = (diff * diff).sum() * (1.0 / diff.numel())
        loss.backward()
        opt.step()
        if step == 1 or step % 50 == 0:
            value = loss.item()
            first = value if first is None else first
            print(f"step {step:4d}  loss {value:.5f}")
    torch.tpu.synchronize()
    dt = time.perf_counter() - t0
    print(f"{STEPS} steps in {dt:.2f} s: {STEPS / dt:.1f} steps/s")
    print(f"loss {first:.5f} -> {value:.5f} ({'down' if value < first else 'NOT down'})")

    s = torch_pjrt.stats()
    print(f"compiles {s['compiles']} ({s['compile_seconds']:.2f} s), memory cache hits "
          f"{s['memory_cache_hits']}, disk cache hits {s['disk_cache_hits']}, "
          f"executes {s['executes']}")
    print(torch_pjrt.fallback_report())

    # The same model evaluated on CPU agrees with the tpu result.
    cpu_model = torch.nn.Sequential(*[m for m in model]).to("cpu")
    ref = cpu_model(x.cpu())
    out = model.to("tpu")(x).cpu()
    print(f"max |tpu - cpu| on the trained model: {(out - ref).abs().max().item():.2e}")


if __name__ == "__main__":
    main()
