"""torch.compile(backend="tpu"): whole graphs lowered to one program each; forward and backward
agree with eager tpu and with CPU; unsupported ops split the graph visibly; the disk cache serves
a second process."""
import copy
import importlib.util
import pathlib
import warnings

import pytest
import torch
import torch.nn as nn

import torch_pjrt.compile as tc
from tpu_helpers import assert_same, run_json


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _bench_module():
    """bench/compile.py, whose small transformer block the tests train too."""
    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "compile.py"
    spec = importlib.util.spec_from_file_location("bench_compile", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


Block = _bench_module().Block


def _models():
    torch.manual_seed(0)
    return {
        "mlp": (nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)),
                torch.randn(5, 8)),
        "cnn_bn": (nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6 * 4 * 4, 5)),
                   torch.randn(4, 3, 8, 8)),
        "transformer_block": (Block(16, 2), torch.randn(2, 6, 16)),
    }


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "transformer_block"])
def test_compiled_training_matches_eager_and_cpu_without_splits(name):
    cpu, x = _models()[name]
    eager = copy.deepcopy(cpu).to("tpu")
    compiled_model = copy.deepcopy(cpu).to("tpu")
    step = torch.compile(compiled_model, backend="tpu")
    outs = {}
    for key, model, fn, inp in [("cpu", cpu, cpu, x), ("eager", eager, eager, x.to("tpu")),
                                ("compiled", compiled_model, step, x.to("tpu"))]:
        out = fn(inp)
        out.pow(2).sum().backward()
        outs[key] = (out, [p.grad for p in model.parameters()],
                     [b.clone() for b in model.buffers()])
    for key in ("eager", "compiled"):
        assert_same(outs[key][0], outs["cpu"][0], atol=1e-5, rtol=1e-4)
        for g, g_cpu in zip(outs[key][1], outs["cpu"][1]):
            assert_same(g, g_cpu, atol=1e-4, rtol=1e-4)
        for b, b_cpu in zip(outs[key][2], outs["cpu"][2]):  # batch norm running stats
            assert_same(b, b_cpu, atol=1e-5, rtol=1e-4)
    s = tc.stats()
    assert s["splits"] == {}, s["split_reasons"]
    assert s["graphs"] == 2 and s["partitions"] == 2  # one program forward, one backward
    assert s["graph_runs"] >= 2


def test_compiled_eval_cnn_with_batch_norm_is_one_program():
    # Eval-mode BatchNorm traces to _native_batch_norm_legit_no_training; without a lowering
    # every one of them split the graph (a compiled EfficientNet-Lite0 ran as 50 programs).
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    cpu = timm.create_model("efficientnet_lite0", pretrained=False, num_classes=10).eval()
    x = torch.randn(1, 3, 64, 64)
    model = torch.compile(copy.deepcopy(cpu).to("tpu"), backend="tpu")
    with torch.no_grad():
        got = model(x.to("tpu"))
        want = cpu(x)
    s = tc.stats()
    assert s["splits"] == {} and s["partitions"] == s["graphs"] == 1, s
    assert_same(got, want, atol=1e-4, rtol=1e-4)


def test_compiled_cat_of_many_tensors_is_one_program():
    # A DenseNet block concatenates up to 48 feature maps: more tensors than one graph node
    # takes, so each such cat split the graph (compiled densenet121: 54 splits).
    xs = [torch.randn(2, i % 5 + 1, 3) for i in range(40)]
    f = lambda *a: torch.cat([t * 2 for t in a], 1).relu().sum(0)  # noqa: E731
    tc.reset_stats()
    got = torch.compile(f, backend="tpu")(*[x.to("tpu") for x in xs])
    s = tc.stats()
    assert s["splits"] == {} and s["partitions"] == s["graphs"] == 1, s
    assert_same(got, f(*xs))


def test_compiled_as_strided_that_restates_the_layout_is_in_the_program():
    # AOTAutograd gives a reduction's [N, C, 1, 1] result channels-last strides with an
    # as_strided (torchvision's ConvNeXt head): the same layout, so no split.
    x = torch.randn(2, 8, 5, 5)
    f = lambda t: torch.as_strided(t.mean((2, 3), keepdim=True), (2, 8, 1, 1), (8, 1, 8, 8)) * 2  # noqa: E731
    tc.reset_stats()
    assert_same(torch.compile(f, backend="tpu")(x.to("tpu")), f(x))
    s = tc.stats()
    assert s["splits"] == {} and s["partitions"] == 1, s
    # an as_strided that moves elements is not one: it runs eagerly, with the right values
    g = lambda t: torch.as_strided(t + 1, (5, 2), (1, 5)) * 2  # noqa: E731
    y = torch.randn(10)
    tc.reset_stats()
    assert_same(torch.compile(g, backend="tpu")(y.to("tpu")), g(y))
    assert tc.stats()["splits"] == {"aten.as_strided.default": 1}, tc.stats()


def test_compiled_repeat_and_tensor_constants_are_in_the_program():
    # repeat (Transformers' attention helpers) and a tensor constant (lift_fresh_copy) split
    # every compiled graph that used them.
    x = torch.randn(2, 3, 4)
    f = lambda t: t.repeat(2, 1, 3) * torch.tensor([1.0, 2.0, 3.0, 4.0] * 3, device=t.device)  # noqa: E731
    tc.reset_stats()
    assert_same(torch.compile(f, backend="tpu")(x.to("tpu")), f(x))
    s = tc.stats()
    assert s["splits"] == {} and s["partitions"] == 1, s


def test_compiled_repeat_of_a_permuted_tensor_is_contiguous():
    # WavLM's relative position bias: a permuted [heads, T, T] repeated over the batch, then
    # viewed. PyTorch's decomposition left the result in the input's layout, and the view raised.
    def f(t):
        r = t.permute(2, 0, 1).unsqueeze(0).repeat(2, 1, 1, 1)
        return r, r.view(4, 9, 9)

    x = torch.randn(9, 9, 2)
    got = torch.compile(f, backend="tpu")(x.to("tpu"))
    want = f(x)
    assert got[0].stride() == want[0].stride()
    assert_same(got[1], want[1])


def test_compiled_function_with_inplace_update_of_input():
    def f(a, b):
        a.add_(b)
        return (a * 2).sum()

    a_cpu, b = torch.randn(6), torch.randn(6)
    a_tpu = a_cpu.to("tpu")
    got = torch.compile(f, backend="tpu")(a_tpu, b.to("tpu"))
    want = f(a_cpu, b)
    assert_same(got, want, atol=1e-5, rtol=1e-5)
    assert_same(a_tpu, a_cpu)  # the input mutation is visible after the call


def test_compiled_adamw_step_matches_eager():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    models, opts, steps = {}, {}, {}
    for key in ("eager", "compiled"):
        models[key] = copy.deepcopy(cpu).to("tpu")
        opts[key] = torch.optim.AdamW(models[key].parameters(), lr=0.05, weight_decay=0.1)
        steps[key] = opts[key].step if key == "eager" else torch.compile(opts[key].step,
                                                                         backend="tpu")
    x = torch.randn(4, 6).to("tpu")
    for _ in range(3):
        for key in ("eager", "compiled"):
            models[key](x).square().mean().backward()
            steps[key]()
            opts[key].zero_grad()
    for p, q in zip(models["compiled"].parameters(), models["eager"].parameters()):
        assert_same(p, q.detach().cpu(), atol=1e-5, rtol=1e-4)
    assert tc.stats()["splits"] == {}, tc.stats()["split_reasons"]


def test_views_of_results_keep_eager_strides_and_are_not_program_outputs():
    def f(x, w):
        y = x @ w + 1
        return y.t(), y.view(-1)[2:5], (x * 2).transpose(0, 1).unsqueeze(0)

    x, w = torch.randn(4, 3), torch.randn(3, 5)
    want = f(x, w)
    got = torch.compile(f, backend="tpu")(x.to("tpu"), w.to("tpu"))
    for g, e in zip(got, want):
        assert_same(g, e, atol=1e-5, rtol=1e-5)
        assert g.stride() == e.stride()
    # Made by PyTorch as views of the two results the program hands out, not copied by it.
    assert got[0]._base is got[1]._base is not None
    assert got[2]._base is not None and got[2]._base.shape == (4, 3)


def test_cpu_scalar_arithmetic_feeding_device_work_runs_inside_the_program():
    def f(x, step):  # |step|: a CPU 0-dim tensor, like an optimizer's step counter
        return x * (1 - 0.9 ** step) / (1 - 0.999 ** step).sqrt()

    x, step = torch.randn(5), torch.tensor(3.0)
    got = torch.compile(f, backend="tpu")(x.to("tpu"), step)
    assert_same(got, f(x, step), atol=1e-6, rtol=1e-5)
    s = tc.stats()
    assert (s["host_ops"], s["splits"], s["partitions"]) == (0, {}, 1), s


def test_complex_rope_forward_and_backward_match_cpu():
    """Llama's rotary embedding as TorchTitan writes it (view_as_complex, a complex multiply,
    view_as_real). Its backward multiplies by _conj(freqs): the conjugate was once dropped in a
    compiled graph (the gradient off by a rotation), which eager and CPU do not do."""
    def rope(x, freqs):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs.view(1, 8, 1, 8)).flatten(3).type_as(x)

    torch.manual_seed(0)
    x, g = torch.randn(2, 8, 4, 16), torch.randn(2, 8, 4, 16)
    freqs = torch.polar(torch.ones(8, 8), torch.randn(8, 8))
    grads = {}
    for dev, fn in (("cpu", rope), ("tpu", torch.compile(rope, backend="tpu"))):
        xx = x.clone().to(dev).requires_grad_()
        y = fn(xx, freqs.to(dev))
        (y * g.to(dev)).sum().backward()
        grads[dev] = (y.detach(), xx.grad)
    for got, want in zip(grads["tpu"], grads["cpu"]):
        assert_same(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_inputs_with_lazy_conjugate_or_negative_bits_are_read_as_their_values(bit):
    z = torch.randn(6, dtype=torch.complex64)
    make = (lambda t: t.conj()) if bit == "conj" else torch._neg_view
    f = torch.compile(lambda a, b: a * 2 + b, backend="tpu")
    got = f(make(z.to("tpu")), z.to("tpu"))
    assert_same(got, make(z) * 2 + z, atol=1e-6, rtol=1e-6)


def test_unsupported_op_splits_the_graph_and_is_reported(quiet_fallbacks):
    def f(x):
        y = torch.linalg.matrix_exp(x * 2)  # no graph lowering: runs eagerly between the parts
        return (y + 1).relu().sum()

    x = torch.randn(3, 3)
    got = torch.compile(f, backend="tpu")(x.to("tpu"))
    assert_same(got, f(x), atol=1e-5, rtol=1e-5)
    s = tc.stats()
    assert s["splits"] == {"aten.linalg_matrix_exp.default": 1}, s
    assert "aten.linalg_matrix_exp.default" in s["split_reasons"]
    assert s["partitions"] == 2  # before and after the split


def test_new_input_shape_recompiles_and_is_counted():
    runs = tc.stats()["graph_runs"]
    f = torch.compile(lambda x: (x * 3).sin().sum(0), backend="tpu")
    for n in (4, 4, 5):
        x = torch.randn(n, 3)
        assert_same(f(x.to("tpu")), (x * 3).sin().sum(0), atol=1e-5, rtol=1e-5)
    s = tc.stats()
    assert s["graphs"] >= 2  # Dynamo's guard on the shape: a new graph for n=5
    assert s["graph_runs"] - runs == 3  # every call one program, the dynamic re-trace included
    assert s["splits"] == {}


def test_dynamic_shapes_are_specialized_per_call_shape():
    f = torch.compile(lambda x: (x * 3).sin().sum(0), backend="tpu", dynamic=True)
    runs = tc.stats()["graph_runs"]
    for n in (4, 5, 6, 5):
        x = torch.randn(n, 3)
        assert_same(f(x.to("tpu")), (x * 3).sin().sum(0), atol=1e-5, rtol=1e-5)
    s = tc.stats()
    assert s["graph_runs"] - runs == 4 and s["splits"] == {}


def test_lowering_failure_degrades_to_eager_with_a_warning(monkeypatch):
    def broken_run(self, inputs, into=()):
        raise torch_pjrt_C().GraphBuildError("building or compiling a graph of 1 ops: injected")

    f = torch.compile(lambda x: x.exp() + 1, backend="tpu")
    x = torch.randn(3)
    monkeypatch.setattr(torch_pjrt_C().Graph, "run", broken_run)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = f(x.to("tpu"))
    assert_same(got, x.exp() + 1, atol=1e-6, rtol=1e-6)
    assert any("failed to build and runs eagerly" in str(m.message) for m in w)


def torch_pjrt_C():
    from torch_pjrt import _C
    return _C


GRAPH_CHILD = r"""
import json, torch, torch.nn as nn, torch_pjrt, torch_pjrt.compile as tc
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to("tpu")
out = torch.compile(m, backend="tpu")(torch.ones(3, 4, device="tpu"))
out.sum().backward()
s = tc.stats()
print(json.dumps({"out": out.detach().cpu().tolist(), "graph_compiles": s["graph_compiles"],
                  "graph_runs": s["graph_runs"], "splits": s["splits"]}))
"""


def test_second_process_reuses_compiled_graphs_from_disk(tmp_path):
    first, _ = run_json(GRAPH_CHILD, timeout=300, TORCH_PJRT_CACHE_DIR=tmp_path / "cache")
    second, _ = run_json(GRAPH_CHILD, timeout=300, TORCH_PJRT_CACHE_DIR=tmp_path / "cache")
    assert first["out"] == second["out"]
    assert first["graph_compiles"] == 2 and first["graph_runs"] == 2  # forward and backward
    assert second["graph_compiles"] == 0 and second["graph_runs"] == 2
    assert first["splits"] == second["splits"] == {}


@pytest.mark.parametrize("kw", [{}, {"mode": "reduce-overhead"}, {"mode": "max-autotune", "fullgraph": True},
                                {"dynamic": True}], ids=["default", "reduce-overhead", "max-autotune", "dynamic"])
def test_torch_compile_with_no_backend_compiles_tpu_graphs_here(kw):
    # Inductor, the default, takes "tpu" for its Pallas/JAX target: a CUDA script's
    # torch.compile(model) on tpu tensors is compiled by backend "tpu" and says so once.
    import torch_pjrt._default_compile as dc
    dc._said.clear()
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    model = copy.deepcopy(cpu).to("tpu")
    x = torch.randn(3, 8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = torch.compile(model, **kw)
        y = f(x.to("tpu"))
        y.sum().backward()
        f(x.to("tpu"))
    said = [str(m.message) for m in w if "compiled by torch_pjrt's backend" in str(m.message)]
    assert len(said) == 1, said
    if kw.get("mode"):
        assert "options ignored" in said[0]
    assert tc.stats()["graphs"] >= 2  # forward and backward, here
    want = cpu(x)
    want.sum().backward()
    assert_same(y, want, atol=1e-5, rtol=1e-5)
    assert_same(model[0].weight.grad, cpu[0].weight.grad, atol=1e-5, rtol=1e-5)


LINEAR_CHILD = r"""
import json, os, torch, torch_pjrt
torch.manual_seed(0)
lin = torch.nn.Linear(512, 384).eval()
x = torch.randn(16, 512)
with torch.no_grad():
    want = lin(x)
    lt = lin.to("tpu")
    eager = lt(x.to("tpu")).cpu()
    compiled = torch.compile(lt, backend="tpu")(x.to("tpu")).cpu()
d = os.environ["TORCH_PJRT_DUMP_DIR"]
texts = {f: open(os.path.join(d, f)).read() for f in sorted(os.listdir(d))}
print(json.dumps({
    "eager": (eager - want).abs().max().item(), "compiled": (compiled - want).abs().max().item(),
    "forms": {f: "optimization_barrier" in t for f, t in texts.items()
              if "addmm" in f or "graph" in f}}))
"""


def test_compiled_linear_takes_the_transposed_weight_form_as_eager_does(tmp_path):
    # nn.Linear's weight reaches addmm as a transposed view (t in the traced graph). XLA's CPU
    # backend multiplies by a large transposed weight at half speed (a 768x3072 layer: 11.4 ms
    # compiled against 6.1 ms eager), so both executors compute the product transposed, behind a
    # barrier (csrc/ops/linalg.c). The graph learns the view's layout from the traced strides.
    got, _ = run_json(LINEAR_CHILD, timeout=300, TORCH_PJRT_DUMP_DIR=tmp_path,
                      TORCH_PJRT_CACHE_DIR="0", TORCH_PJRT_SHAPE_BUCKETS="off")
    assert got["eager"] < 1e-4 and got["compiled"] < 1e-4, got
    forms = got["forms"]
    assert any("addmm" in f for f in forms) and any("graph" in f for f in forms), forms
    assert all(forms.values()), forms
