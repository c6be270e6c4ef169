"""Shape buckets (exec/bucket.h): a program compiled for a bucket serves every size inside it,
with results equal to exact shapes (bitwise where the op is exact) and to CPU, across bucket
boundaries, 0- and 1-sized dims, non-finite values, strided inputs, in-place ops and autograd; far
fewer compiles than exact shapes; a policy that can be changed or turned off."""
import json
import os
import subprocess
import sys

import pytest
import torch

from tpu_helpers import child_env, run_json

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "buckets.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import buckets  # noqa: E402  (the cases, for INEXACT)


def _run(tmp_path, device, name, **env):
    out = tmp_path / f"{name}.pt"
    if device == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    p = subprocess.run([sys.executable, SCRIPT, device, str(out)], capture_output=True, text=True,
                       timeout=900, env=child_env(TORCH_PJRT_CACHE_DIR="0", **env))
    assert p.returncode == 0, p.stderr[-4000:]
    stats = json.loads(p.stdout.strip().splitlines()[-1]) if device == "tpu" else None
    return torch.load(out), stats


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("buckets")
    on, on_stats = _run(tmp, "tpu", "on")
    off, off_stats = _run(tmp, "tpu", "off", TORCH_PJRT_SHAPE_BUCKETS="off")
    cpu, _ = _run(tmp, "cpu", "cpu")
    return on, on_stats, off, off_stats, cpu


def _pairs(a, b):
    for case, per_size in a["results"].items():
        for n, xs, ys in zip(a["sizes"], per_size, b["results"][case]):
            assert len(xs) == len(ys), (case, n)
            for j, (x, y) in enumerate(zip(xs, ys)):
                yield case, n, j, x, y


def test_bucketed_equals_exact_shapes(runs):
    on, _, off, _, _ = runs
    for case, n, j, x, y in _pairs(on, off):
        assert x.dtype == y.dtype and x.shape == y.shape, (case, n, j)
        if j in buckets.INEXACT.get(case, ()):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=2e-5, equal_nan=True,
                                       msg=lambda m: f"{case} n={n} result {j}: {m}")
        else:  # bitwise, NaN where exact shapes have NaN
            assert torch.equal(x.view(torch.uint8) if x.dtype == torch.bool else x, y) or (
                x.is_floating_point() and torch.equal(x.isnan(), y.isnan()) and
                torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0))), f"{case} n={n} result {j}"


def test_bucketed_matches_cpu(runs):
    on, _, _, _, cpu = runs
    for case, n, j, x, y in _pairs(on, cpu):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4, equal_nan=True,
                                   msg=lambda m: f"{case} n={n} result {j}: {m}")


def test_buckets_compile_far_less_and_fall_back_never(runs):
    _, on, _, off, _ = runs
    assert on["fallbacks"] == {} and off["fallbacks"] == {}
    assert on["bucketed_calls"] > 0 and on["compiles_bucketed"] > 0
    assert off["bucketed_calls"] == 0 and off["compiles_bucketed"] == 0
    # 14 sizes, 4 of them new buckets past the first (16, 32, 64 and the exact first sizes).
    assert on["compiles"] * 2 < off["compiles"], (on, off)


_DECODE = """
import json, torch, torch_pjrt
w = torch.randn(8, 8, device="tpu")
def step(n):
    x = torch.ones(2, n, 8, device="tpu") + torch.arange(n, device="tpu").view(1, n, 1)
    return torch.softmax((x @ w) @ (x @ w).transpose(1, 2), -1).sum()
for n in range(1, 20):  # warm-up: every bucket up to 32
    step(n)
torch_pjrt.reset_stats()
for n in range(20, 33):
    step(n).item()
s = torch_pjrt.stats()
print(json.dumps([s["compiles"], s["bucketed_calls"]]))
"""


def test_sizes_inside_a_warm_bucket_compile_nothing():
    (compiles, bucketed), _ = run_json(_DECODE, TORCH_PJRT_CACHE_DIR="0")
    assert compiles == 0 and bucketed > 0, (compiles, bucketed)


_POLICY = """
import json, torch, torch_pjrt
torch_pjrt.reset_stats()
for n in (2, 3, 5, 9, 12, 20, 40):
    (torch.ones(n, 4, device="tpu") * 2).relu().sum(0).cpu()
print(json.dumps(torch_pjrt.stats()["compiles"]))
"""


def test_policy_is_configurable():
    # pow2 (from 16) puts 2..16 in one bucket; pow2:4 splits them (4, 8, 16); a list goes on by
    # powers of two past its last size; off compiles every size.
    n = {p: run_json(_POLICY, TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_SHAPE_BUCKETS=p)[0]
         for p in ("pow2", "pow2:4", "8,16", "off")}
    assert n["pow2"] < n["pow2:4"] < n["off"], n
    assert n["8,16"] <= n["pow2:4"], n


def test_resizing_a_bucketed_storage_keeps_its_values():
    # A bucketed result's buffer holds more than its storage; FSDP-style resize_ keeps the front.
    import torch_pjrt
    for n in (3, 5, 6, 7):
        before = torch_pjrt.stats()["bucketed_calls"]
        z = torch.arange(2 * n * 4, dtype=torch.float32, device="tpu").reshape(2, n, 4) * 2
    assert torch_pjrt.stats()["bucketed_calls"] > before
    ref = z.cpu()
    s = z.untyped_storage()
    s.resize_(8 * 4)
    assert torch.equal(torch.empty(0, device="tpu").set_(s, 0, (8,), (1,)).cpu(), ref.reshape(-1)[:8])
    s.resize_(100 * 4)
    assert torch.equal(torch.empty(0, device="tpu").set_(s, 0, (8,), (1,)).cpu(), ref.reshape(-1)[:8])


def test_log_names_bucket_compiles():
    code = _POLICY.replace("print(", "import sys; sys.stderr.flush(); print(")
    p = __import__("tpu_helpers").run_python(code, TORCH_PJRT_CACHE_DIR="0",
                                              TORCH_PJRT_LOG_COMPILES="1")
    assert p.returncode == 0, p.stderr
    assert "torch_pjrt: compile relu (float32[16, 4]): new shapes, bucket, " in p.stderr, p.stderr


_GENERATE = """
import json, torch, torch_pjrt
from transformers import CompileConfig, LlamaConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList
KW, WARM = %s, %s
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256)
cpu = LlamaForCausalLM(cfg).eval()
tpu = LlamaForCausalLM(cfg).eval()
tpu.load_state_dict(cpu.state_dict())
tpu.to("tpu")

class Count(LogitsProcessor):  # compiles up to each generated token
    def __init__(self):
        self.seen = []
    def __call__(self, ids, scores):
        self.seen.append(torch_pjrt.stats()["compiles"])
        return scores

def generate(model, n, dev, counter=None):
    prompt = (torch.arange(1, n + 1) * 5).remainder(120).unsqueeze(0).to(dev)
    with torch.no_grad():
        return model.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                              pad_token_id=0, logits_processor=LogitsProcessorList(
                                  [counter] if counter else []), **KW).cpu()

for n in WARM:  # warm-up: the first sizes, then the bucket (up to 16 tokens)
    generate(tpu, n, "tpu")
torch_pjrt.reset_stats()
result = {}
for n in (6, 8, 4):  # new prompt lengths inside the warm bucket
    c = Count()
    out = generate(tpu, n, "tpu", c)
    result[n] = {"per_token": [b - a for a, b in zip([0] + c.seen, c.seen)],
                 "compiles": torch_pjrt.stats()["compiles"],
                 "equal": torch.equal(out, generate(cpu, n, "cpu"))}
    torch_pjrt.reset_stats()
print(json.dumps(result))
"""


@pytest.mark.parametrize("kw,warm", [
    ("{}", (5, 7)),  # the dynamic KV cache, eager
    # the static cache: transformers compiles the decode step (for tpu with dynamic=False);
    # max_cache_len sizes the cache for every call, so the prefill is what changes
    ("{'cache_implementation': 'static', 'max_cache_len': 32}", (5, 7)),
    # the static cache sized to each prompt (n + 7; a shorter prompt reuses a longer cache), the
    # decode graph left symbolic and bucketed: the new lengths 6 and 8 grow it inside the bucket
    ("{'cache_implementation': 'static', "
     "'compile_config': CompileConfig(backend='tpu', dynamic=None, mode='default')}", (3, 4, 5)),
], ids=["dynamic-cache", "static-cache", "static-cache-automatic-dynamic"])
def test_generate_with_a_new_prompt_length_compiles_nothing(kw, warm):
    # Hugging Face generate(): after a warm-up that reaches the bucket, a new prompt length
    # compiles nothing, in its prefill or at any decode step, and generates what CPU generates.
    result, _ = run_json(_GENERATE % (kw, warm), timeout=600, TORCH_PJRT_CACHE_DIR="0",
                         TORCH_PJRT_QUIET_FALLBACK="1")
    for n, r in result.items():
        assert r["equal"], (n, r)
        assert r["per_token"] == [0] * 8 and r["compiles"] == 0, (n, r)


def test_an_index_past_the_live_rows_is_still_an_error():
    # Rows past a tensor's live size may exist in its padded buffer; reading one is still an
    # index error, as on CPU, not a read of padding.
    for n in (3, 5, 9, 17, 20):
        x = torch.randn(n, 4, device="tpu")
        idx = torch.tensor([0, n - 1] * (n // 2), device="tpu")
        assert torch.equal(x.index_select(0, idx).cpu(), x.cpu().index_select(0, idx.cpu()))
    with pytest.raises(IndexError):
        x.index_select(0, torch.tensor([n], device="tpu")).cpu()


_FIXED_LOOP = """
import json, torch, torch_pjrt
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).to("tpu")
opt = torch.optim.SGD(layer.parameters(), lr=0.01)
compiled = torch.compile(layer, backend="tpu")
x = torch.randn(8, 32, 64).to("tpu")
result = {}
for name, model in (("eager", layer), ("compiled", compiled)):
    per_step = []
    for _ in range(4):
        torch_pjrt.reset_stats()
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.tpu.synchronize()
        s = torch_pjrt.stats()
        per_step.append([s["bucketed_calls"], s["compiles"]])
    result[name] = per_step
print(json.dumps(result))
"""


def test_a_fixed_shape_training_loop_runs_exact_programs_only():
    # Nothing changes shape in this loop, yet calls of one kind in one context (the optimizer's
    # update of each parameter, the attention's head copies) met several sizes at one site and
    # ran bucketed programs at every step: half the speed of buckets off. After its first step,
    # eager or compiled, the loop runs exact programs only, and compiles nothing after its second.
    result, _ = run_json(_FIXED_LOOP, TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_SHAPE_BUCKETS="pow2")
    for name, steps in result.items():
        assert all(bucketed == 0 for bucketed, _ in steps[1:]), (name, steps)
        assert all(compiles == 0 for _, compiles in steps[2:]), (name, steps)


_STAGED_MODEL = """
import json, torch, timm, torch_pjrt
torch.manual_seed(0)
# timm's Swin, narrow: 4 stages of blocks whose calls share sites, each stage its own sizes
m = timm.create_model("swin_tiny_patch4_window7_224", embed_dim=24, depths=(2, 2, 2, 2),
                      num_heads=(1, 1, 2, 2)).eval()
x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    ref = m(x)
    mt, xt = m.to("tpu"), x.to("tpu")
    passes = []
    for _ in range(3):
        torch_pjrt.reset_stats()
        out = mt(xt).cpu()
        s = torch_pjrt.stats()
        passes.append([s["bucketed_calls"], s["compiles"] + s["disk_cache_hits"]])
print(json.dumps({"passes": passes, "err": (out - ref).abs().max().item()}))
"""


def test_a_model_whose_stages_share_sites_runs_exact_programs_from_its_second_pass():
    # A model's forward repeated (timm's Swin): a call's signature held its arguments' buffer
    # lengths, which change when the call producing them turns from bucketed to exact, so the
    # model settled one layer per pass, running bucketed programs (which read its strided windows
    # with a gather) for passes on end: 4.6x CPU's time against 1.2x settled.
    result, _ = run_json(_STAGED_MODEL, timeout=600)
    (_, _), (bucketed_2, _), (bucketed_3, loaded_3) = result["passes"]
    assert bucketed_2 == bucketed_3 == loaded_3 == 0, result
    assert result["err"] < 1e-4, result


_HISTORY = """
import json, os, torch, torch_pjrt
import torch_pjrt.compile as tc
torch.use_deterministic_algorithms(os.environ["DET"] == "1")
sizes = [3, 5, 9, 17, 20]
order = sizes if os.environ["ORDER"] == "up" else sizes[::-1]
f = torch.compile(lambda x: (x.t() @ x).sum(0) + x.sum(0), backend="tpu", dynamic=True)
torch_pjrt.reset_stats()
tc.reset_stats()
got = {}
for n in order:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 8, generator=g).to("tpu")
    # padded dims reduced: a sum and a matmul's contraction over the rows
    got[n] = [(x.t() @ x).sum(0).cpu().tolist(), x.sum(0).cpu().tolist(), f(x).cpu().tolist()]
print(json.dumps({"got": got, "bucketed": torch_pjrt.stats()["bucketed_calls"],
                  "graphs": tc.stats()["bucketed_graphs"]}))
"""


def test_deterministic_mode_results_do_not_depend_on_what_ran_before():
    # Whether a call runs bucketed depends on the sizes its site met before, and a padded
    # reduction rounds unlike the exact one: a TorchTitan run resumed from a checkpoint parted
    # from the first by 1e-5. Under torch.use_deterministic_algorithms(True) every call and
    # compiled graph runs its exact program, so a size's results are the same in any order.
    runs = {(det, order): run_json(_HISTORY, TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_SHAPE_BUCKETS="pow2",
                                   DET=det, ORDER=order)[0]
            for det in ("0", "1") for order in ("up", "down")}
    assert runs["0", "up"]["bucketed"] > 0 and runs["0", "up"]["graphs"] > 0  # would bucket
    for order in ("up", "down"):
        assert runs["1", order]["bucketed"] == 0 and runs["1", order]["graphs"] == 0, runs["1", order]
    assert runs["1", "up"]["got"] == runs["1", "down"]["got"]
