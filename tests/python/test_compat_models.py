"""The model harness's own rules (tools/compat_models.py): tiny configs, the CPU-vs-tpu check
of one model, and a COMPAT.md that keeps both the op sweep's and the harness's results."""
import copy
import json

import pytest
import torch

import compat
import compat_models


def test_shrink_config_makes_tiny_models():
    from transformers import AutoConfig
    config = compat_models.shrink_config(AutoConfig.for_model("llama"))
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.intermediate_size, config.vocab_size) == (32, 2, 2, 37, compat_models.VOCAB)
    assert config.num_key_value_heads == 1
    clip = compat_models.shrink_config(AutoConfig.for_model("clip"))  # nested sub-configs too
    assert clip.vision_config.hidden_size == 32 and clip.vision_config.image_size == 32
    assert clip.text_config.num_hidden_layers == 2


def test_check_one_model_matches_and_reports_fallbacks():
    record = compat_models.check_model("transformers", "llama")
    assert record["status"] == "native", record
    assert set(record["classes"]) == {"LlamaModel", "LlamaForCausalLM"}
    assert all(c["params"] < 100_000 for c in record["classes"].values())
    # Compiled, each class's forward is one device program.
    assert record["compiled"]["status"] == "one program", record["compiled"]
    assert record["compiled"]["classes"] == 2 and record["compiled"]["graphs"] == 2


def test_cpu_failure_is_cpu_invalid_not_fail():
    def build():
        return torch.nn.Linear(4, 3)
    result = compat_models.check(build, lambda model: torch.zeros(2, 5))  # wrong width on CPU too
    assert result["status"] == "cpu-invalid" and "RuntimeError" in result["reason"]


def test_compat_md_keeps_ops_and_models_sections(tmp_path):
    ops = dict(command="python tools/compat.py ops --quick", torch="x", platform="cpu",
               dtypes=["float32"], samples=1, native_ops=["add.Tensor"], date="today",
               cases=[dict(op="add", variant="function", dtype="float32", sample=0, status="native",
                           reason="", fallbacks=[])])
    (tmp_path / "ops.json").write_text(json.dumps(ops))
    records = [dict(suite="torchvision", name="a", status="native", reason="", fallbacks=[]),
               dict(suite="torchvision", name="b", status="fallback", reason="", fallbacks=["op_x"]),
               dict(suite="torchvision", name="c", status="fail", reason="RuntimeError: boom 12"),
               dict(suite="torchvision", name="d", status="cpu-invalid", reason="bad config")]
    doc = dict(command="python tools/compat.py models", torch="x", versions={}, date="today",
               seconds=1, models=records)
    compat_models.write(doc, str(tmp_path))
    md = tmp_path / "COMPAT.md"
    compat.write_markdown(str(tmp_path), str(md))
    text = md.read_text()
    assert "## Per op" in text and "## Models" in text
    assert "| torchvision | 4 | 3 | 1 | 1 | 1 | 66.7% | 1 | 0 |" in text
    assert "RuntimeError: boom N" in text and "`op_x` (1)" in text
    # The op sweep rewrites COMPAT.md through the same function: the models section stays.
    compat.write_report({k: v for k, v in ops.items() if k != "cases"}, ops["cases"], str(tmp_path), str(md))
    assert "## Models" in md.read_text()


def test_float64_decides_a_float32_mismatch():
    # When tpu and CPU float32 results differ, float64 decides: CPU's float32 result off and
    # tpu's at the float64 value passes; the other way round is still a failure.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).eval()
    x = torch.tensor([[1.0, 2.0, -3.0, 0.5]])
    exact = compat_models._run(copy.deepcopy(model).double(), x.double(), 0)
    expected = {k: v.float() + (0.5 if k == "out" else 0.0) for k, v in exact.items()}  # CPU "off"
    actual = {k: v.float() for k, v in exact.items()}
    mismatch = AssertionError("out: max abs diff 0.5 (atol 0.0001)")
    note = compat_models._float64_verdict(model, x, 0, actual, expected, mismatch)
    assert "float64" in note
    with pytest.raises(AssertionError, match="max abs diff"):  # the tpu side off: still a failure
        compat_models._float64_verdict(model, x, 0, expected, actual, mismatch)


class _SplitsOnce(torch.nn.Module):
    """cummax has no graph lowering (the compiled graph splits there); the explicit graph break
    makes Dynamo capture two graphs."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.cummax(self.lin(x), dim=-1).values * 2
        torch._dynamo.graph_break()
        return y + 1


def test_compiled_entry_and_column():
    # The compiled check (torch.compile(backend="tpu"), one eval forward) of a model that is one
    # program and of one that splits, and how the report shows them.
    mlp = compat_models.check(lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()),
                              lambda model: torch.randn(2, 4))
    assert mlp["status"] == "native" and mlp["compiled"]["status"] == "one program", mlp
    assert (mlp["compiled"]["graphs"], mlp["compiled"]["partitions"]) == (1, 1)
    split = compat_models.check(_SplitsOnce, lambda model: torch.randn(2, 4))
    c = split["compiled"]
    assert split["status"] == "native" and c["status"] == "split", split
    assert c["splits"] == {"cummax": 1} and c["graphs"] == 2 and c["graph_breaks"] == 1
    off = compat_models.check(_SplitsOnce, lambda model: torch.randn(2, 4), compiled=False)
    assert "compiled" not in off
    records = [dict(suite="timm", name="mlp", status="native", reason="", fallbacks=[], compiled=mlp["compiled"]),
               dict(suite="timm", name="splits", status="native", reason="", fallbacks=[], compiled=c),
               dict(suite="timm", name="old", status="native", reason="", fallbacks=[]),
               dict(suite="timm", name="bad", status="fail", reason="RuntimeError: x", fallbacks=[],
                    compiled=dict(status="fail", reason="timeout (> 9 s)", graphs=0, partitions=0,
                                  graph_breaks=0, splits={}, split_reasons={}))]
    text = compat_models.render_models(dict(command="c", torch="x", date="today", models=records))
    assert "| mlp | native |  | one program |" in text
    assert "| splits | native |  | split: cummax (1) (2 graphs, 1 graph breaks) |" in text
    assert "| old | native |  | - |" in text and "| fail: timeout (> 9 s) |" in text
    assert ("- timm: 1 one program, 1 split, 1 fail, 1 not compiled; 1 with Dynamo graph breaks. "
            "Ops that split, by number of models: `cummax` (1)") in text


class _OtherUnderCompile(torch.nn.Module):
    """Does something else under torch.compile, as some Transformers models do."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return y * 2 if torch.compiler.is_compiling() else y


def test_compiled_difference_that_cpu_compile_shares_is_not_a_fail():
    # The compiled forward differs from CPU's eager one, and equals the model compiled on CPU:
    # the model's own code, not the device (a compiled Aimv2 pools other tokens).
    r = compat_models.check(_OtherUnderCompile, lambda model: torch.randn(2, 4))
    c = r["compiled"]
    assert c["status"] == "one program" and c.get("cpu_compiled_differs"), c
    assert compat_models._compiled_cell(c) == "one program (‡)"
