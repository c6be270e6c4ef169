"""Blind model harness: models nobody wrote for this project, on CPU and on "tpu" from the same weights.

    python tools/compat.py models [--suites transformers,torchvision,timm] [--only NAME,...]
                                  [--limit N] [--jobs N] [--timeout S] [--no-compile]
                                  [--shuffle] [--time-limit S] [--resume]
                                  [--out DIR] [--md PATH]

Suites, enumerated at run time from the installed packages:
- transformers: every model type of its config registry that has a base model class. The
  default config is shrunk to tiny sizes (hidden 32, 2 layers, 2 heads, intermediate 37, vocab
  99, images 32x32, short audio; nested sub-configs too), then the base model and its main head
  class (causal LM, masked LM, seq2seq, classification, ... in that order) are built from it.
- torchvision: every classification model, built without weights.
- timm: the smallest model of each of its architecture modules, built without weights.

Each model is built on CPU from a fixed seed, copied and moved with `.to("tpu")`, and both
copies run forward in eval mode (no dropout) and backward of one scalar: the loss where the
head computes one from `labels`, plus a fixed random weighting of every floating output. The
outputs and the gradients of every parameter are compared with assert_close (float32:
rtol 1e-4, atol 1e-4 scaled by the largest reference magnitude). Each model ends as:

    native       matched, and no op fell back to CPU on the tpu side
    fallback     matched, but some ops ran through the CPU fallback (recorded)
    fail         exception, mismatch, crash or timeout on the tpu side (first line of the reason)
    cpu-invalid  the tiny config or the dummy inputs do not work on CPU: not counted
    skipped      too large for this harness (parameters over the cap): not counted

Then, unless --no-compile, each model that ran on CPU is compiled from a fresh copy of the same
weights with torch.compile(model, backend="tpu") and run forward once (eval, no_grad); its
outputs are compared with CPU's in the same way, and the record's "compiled" entry says

    one program  every graph Dynamo captured became one device program
    split        some op had no graph lowering and ran eagerly between programs ("splits":
                 op -> count, with "split_reasons"); Dynamo's graph breaks are counted apart
    fail         exception, mismatch, crash or timeout of the compiled run (its reason)

A failure there never changes the eager status. The per-model timeout covers both runs.

Models run in worker processes that stream JSON lines back; a worker that crashes or passes the
per-model timeout is killed, the model is recorded as failed, and a new worker goes on after it.
"""
import collections
import copy
import gc
import inspect
import json
import os
import sys
import threading
import time
import traceback

import torch

import _child

SUITES = ("transformers", "torchvision", "timm")
COUNTED = ("native", "fallback", "fail")
MAX_PARAMS = 150_000_000
VOCAB = 99
SEQ = 7
RTOL = ATOL = 1e-4

# Head classes, in order of preference: the first mapping that has the model type is "the" head.
HEADS = ["SEQ_TO_SEQ_CAUSAL_LM", "SPEECH_SEQ_2_SEQ", "MASKED_LM", "CAUSAL_LM", "CTC",
         "SEQUENCE_CLASSIFICATION", "IMAGE_CLASSIFICATION", "AUDIO_CLASSIFICATION",
         "IMAGE_TEXT_TO_TEXT", "MULTIMODAL_LM", "PRETRAINING", "TOKEN_CLASSIFICATION",
         "QUESTION_ANSWERING", "SEMANTIC_SEGMENTATION", "DEPTH_ESTIMATION", "OBJECT_DETECTION",
         "TIME_SERIES_PREDICTION"]
LM_HEADS = {"CAUSAL_LM", "MASKED_LM", "SEQ_TO_SEQ_CAUSAL_LM"}


# ----------------------------------------------------------------------------- enumeration

def list_models(suite):
    """Names of the models of `suite`, as the installed package reports them."""
    if suite == "transformers":
        from transformers.models.auto import configuration_auto, modeling_auto
        return sorted(t for t in configuration_auto.CONFIG_MAPPING_NAMES
                      if t in modeling_auto.MODEL_MAPPING_NAMES)
    if suite == "torchvision":
        import torchvision.models
        return sorted(torchvision.models.list_models(module=torchvision.models))
    if suite == "timm":
        import timm
        names = []
        for module in sorted(timm.list_modules()):
            models = timm.list_models(module=module)
            if models:
                names.append(min(models, key=_timm_size_rank))
        return names
    raise ValueError(f"unknown suite {suite}")


def _timm_size_rank(name):
    for rank, word in enumerate(["atto", "femto", "pico", "nano", "tiny", "xxs", "xs", "small", "s_", "b0", "18"]):
        if word in name:
            return (rank, len(name), name)
    return (99, len(name), name)


# ----------------------------------------------------------------------------- tiny configs

_SIZES = {
    # widths
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "embed_dim": 32, "dim": 32, "n_embed": 32,
    "embedding_size": 32, "word_embed_proj_dim": 32, "projection_dim": 32, "proj_dim": 32,
    "text_embed_dim": 32, "vision_embed_dim": 32, "d_embed": 32, "hidden_dim": 32,
    "encoder_hidden_size": 32, "decoder_hidden_size": 32, "cross_attention_hidden_size": None,
    "head_dim": 16, "kv_channels": 16, "d_kv": 16, "attention_head_dim": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "q_lora_rank": 16,
    "kv_lora_rank": 16, "qk_head_dim": 16,
    # depths
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2, "encoder_layers": 2,
    "decoder_layers": 2, "num_encoder_layers": 2, "num_decoder_layers": 2, "depth": 2,
    "num_blocks": 2,
    # heads
    "num_attention_heads": 2, "n_head": 2, "n_heads": 2, "num_heads": 2,
    "encoder_attention_heads": 2, "decoder_attention_heads": 2, "num_key_value_heads": 1,
    "num_kv_heads": 1, "n_kv_heads": 1, "multi_query_group_num": 1,
    # feed-forward
    "intermediate_size": 37, "ffn_dim": 37, "encoder_ffn_dim": 37, "decoder_ffn_dim": 37,
    "d_ff": 37, "n_inner": 37, "ffn_hidden_size": 37, "moe_intermediate_size": 37,
    "shared_expert_intermediate_size": 37, "mlp_dim": 37, "dim_feedforward": 37,
    # experts
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "n_shared_experts": 1, "first_k_dense_replace": 1,
    "n_group": 1, "topk_group": 1, "num_groups": 8,
    # vocabularies and lengths
    "vocab_size": VOCAB, "max_position_embeddings": 64, "n_positions": 64, "n_ctx": 64,
    "max_seq_len": 64, "seq_length": 64, "max_source_positions": 30, "max_target_positions": 64,
    "type_vocab_size": 2, "num_mel_bins": 16,
    # images and audio
    "image_size": 32, "img_size": 32, "patch_size": 4, "num_channels": 3, "num_frames": 2,
    "conv_dim": 32,
}


def _shrink_value(name, value):
    """The tiny replacement for config field `name` holding `value`, or `value` itself."""
    if isinstance(value, bool) or value is None:
        return value
    if name in _SIZES and isinstance(value, int):
        tiny = _SIZES[name]
        return value if tiny is None else min(value, tiny) if name != "vocab_size" else tiny
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        kind = type(value)
        if name in ("depths", "num_layers", "layers_per_block", "encoder_depths", "decoder_depths"):
            return kind([1] * len(value))
        if name in ("hidden_sizes", "embed_dims", "dims", "channels", "widths", "block_out_channels",
                    "embed_dim", "encoder_hidden_sizes", "decoder_hidden_sizes"):
            return kind(min(v, 16 * 2 ** i) for i, v in enumerate(value))
        if name in ("num_heads", "num_attention_heads", "encoder_attention_heads", "heads"):
            return kind([1] * len(value))
        if name == "conv_dim":
            return kind([32] * len(value))
    return value


_MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_FFN_FIELDS = ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
               "ffn_dim", "d_ff", "ffn_hidden_size")


def shrink_config(config, depth=0):
    """Shrinks `config` (a transformers PretrainedConfig) in place, sub-configs included."""
    # Mixture-of-experts layers run grouped matmuls, whose CPU kernel wants rows of a multiple of
    # 16 bytes: 32 instead of the odd 37 there.
    moe = any(isinstance(getattr(config, f, None), int) and getattr(config, f) for f in _MOE_FIELDS)
    for name, value in list(vars(config).items()):
        if name.startswith("_"):
            continue
        if moe and name in _FFN_FIELDS and isinstance(value, int) and not isinstance(value, bool):
            setattr(config, name, min(value, 32))
            continue
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and depth < 3:
            shrink_config(value, depth + 1)
            continue
        new = _shrink_value(name, value)
        if new is not value:
            try:
                setattr(config, name, new)
            except Exception:
                pass
    # Keep pieces that must agree consistent.
    heads = getattr(config, "num_attention_heads", None)
    if isinstance(heads, int) and isinstance(getattr(config, "num_key_value_heads", None), int):
        config.num_key_value_heads = min(config.num_key_value_heads, heads)
    for field in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                  "sep_token_id", "cls_token_id", "mask_token_id"):
        v = getattr(config, field, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= VOCAB:
            try:
                setattr(config, field, {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}.get(field, 2))
            except Exception:
                pass
    if hasattr(config, "layer_types") and isinstance(config.layer_types, list):
        n = getattr(config, "num_hidden_layers", None)
        if isinstance(n, int) and len(config.layer_types) != n:
            config.layer_types = config.layer_types[:n]
    if hasattr(config, "num_labels"):
        try:
            config.num_labels = 3
        except Exception:
            pass
    return config


# ----------------------------------------------------------------------------- inputs

def _accepts(model, name):
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _gen(seed=1):
    return torch.Generator().manual_seed(seed)


def hf_inputs(model, config, head):
    """Dummy CPU inputs for a transformers model: by its main_input_name and config."""
    main = getattr(model, "main_input_name", "input_ids")
    cfg = config
    inputs = {}
    if main == "input_ids":
        vocab = getattr(cfg, "vocab_size", None) or getattr(getattr(cfg, "text_config", None), "vocab_size", None) or VOCAB
        ids = torch.randint(3, max(4, min(vocab, VOCAB)), (2, SEQ), generator=_gen())
        inputs["input_ids"] = ids
        if _accepts(model, "attention_mask"):
            inputs["attention_mask"] = torch.ones_like(ids)
    elif main == "pixel_values":
        vc = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vc, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        channels = getattr(vc, "num_channels", 3)
        frames = getattr(vc, "num_frames", None)
        shape = (2, frames, channels, size, size) if isinstance(frames, int) else (2, channels, size, size)
        inputs["pixel_values"] = torch.randn(*shape, generator=_gen())
    elif main == "input_values":
        inputs["input_values"] = torch.randn(2, 3200, generator=_gen())
    elif main == "input_features":
        if hasattr(cfg, "num_mel_bins") and hasattr(cfg, "max_source_positions"):
            inputs["input_features"] = torch.randn(2, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=_gen())
        else:
            feat = getattr(cfg, "input_feat_per_channel", None) or getattr(cfg, "feature_size", None) or 80
            chans = getattr(cfg, "input_channels", 1)
            inputs["input_features"] = torch.randn(2, 32, feat * chans, generator=_gen())
    else:
        raise NotImplementedError(f"no dummy inputs for main_input_name {main!r}")
    vc = getattr(cfg, "vision_config", None)
    if main != "pixel_values" and vc is not None and _accepts(model, "pixel_values"):
        size = getattr(vc, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        inputs["pixel_values"] = torch.randn(2, getattr(vc, "num_channels", 3), size, size, generator=_gen(3))
    if getattr(cfg, "is_encoder_decoder", False) and _accepts(model, "decoder_input_ids"):
        start = getattr(cfg, "decoder_start_token_id", None)
        dec = torch.randint(3, VOCAB, (2, 5), generator=_gen(2))
        if isinstance(start, int):
            dec[:, 0] = start
        inputs["decoder_input_ids"] = dec
    if head in LM_HEADS and "input_ids" in inputs and _accepts(model, "labels"):
        inputs["labels"] = inputs.get("decoder_input_ids", inputs["input_ids"]).clone()
    if _accepts(model, "use_cache"):
        inputs["use_cache"] = False
    return inputs


# ----------------------------------------------------------------------------- one model

def _tensors(tree, prefix="out"):
    """(name, tensor) for every tensor in a model output (ModelOutput, tuple, dict, ...)."""
    if isinstance(tree, torch.Tensor):
        yield prefix, tree
    elif isinstance(tree, dict) or hasattr(tree, "to_tuple"):
        items = tree.items() if isinstance(tree, dict) else zip(tree.keys(), tree.to_tuple())
        for k, v in items:
            yield from _tensors(v, f"{prefix}.{k}")
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from _tensors(v, f"{prefix}[{i}]")


def _run(model, inputs, seed, backward=True):
    """Forward, then backward of loss + fixed random weights . float outputs. Returns the
    outputs and the parameter grads, on CPU, as {name: tensor}. With backward=False: the
    forward alone, under no_grad, and its outputs."""
    if not backward:
        with torch.no_grad():
            out = model(**inputs) if isinstance(inputs, dict) else model(inputs)
        return {k: v.detach().cpu() for k, v in _tensors(out)}
    out = model(**inputs) if isinstance(inputs, dict) else model(inputs)
    outs = dict(_tensors(out))
    scalar = None
    gen = torch.Generator().manual_seed(seed)
    for name, t in outs.items():
        if t.requires_grad and t.is_floating_point():
            w = torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.device, t.dtype)
            term = (t * w).sum().float()
            scalar = term if scalar is None else scalar + term
    if scalar is not None:
        scalar.backward()
    result = {k: v.detach().cpu() for k, v in outs.items()}
    for name, p in model.named_parameters():
        if p.grad is not None:
            result["grad." + name] = p.grad.detach().cpu()
    return result


def _compare(actual, expected):
    missing = sorted(set(expected) ^ set(actual))
    if missing:
        raise AssertionError(f"results differ in presence: {missing[:3]}")
    for name, e in expected.items():
        a = actual[name]
        if a.shape != e.shape or a.dtype != e.dtype:
            raise AssertionError(f"{name}: {tuple(a.shape)} {a.dtype} vs CPU {tuple(e.shape)} {e.dtype}")
        if e.is_floating_point() or e.is_complex():
            scale = max(1.0, e.abs().max().item()) if e.numel() and torch.isfinite(e).all() else 1.0
            rtol, atol = (RTOL, ATOL * scale) if e.dtype in (torch.float32, torch.float64) else (2e-2, 2e-2 * scale)
            try:
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError:
                diff = (a.double() - e.double()).abs().nan_to_num(float("inf")).max().item()
                raise AssertionError(f"{name}: max abs diff {diff:.3g} (atol {atol:.3g})") from None
        elif not torch.equal(a, e):
            raise AssertionError(f"{name}: values differ")


def reason_of(exc):
    return _child.reason_of(exc, 240)


def _to_device(inputs, device):
    if isinstance(inputs, torch.Tensor):
        return inputs.to(device)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


# Whether check() also compiles the model (set by the worker from the driver's --no-compile);
# while check_model() collects them, the compiled checks wait in this list until every class
# of the model has run eagerly.
COMPILE = True
_DEFERRED = None


def check(build, make_inputs, seed=0, compiled=None):
    """Builds, runs and compares one model. Returns {status, reason, fallbacks, params}, and for
    a model that ran on CPU, unless compiled=False (default: COMPILE), a "compiled" entry from
    check_compiled()."""
    import torch_pjrt
    torch.manual_seed(seed)
    try:
        with torch.device("meta"):
            n = sum(p.numel() for p in build().parameters())
    except Exception:
        n = None
    if n is not None and n > MAX_PARAMS:
        return dict(status="skipped", reason=f"{n / 1e6:.0f}M parameters (cap {MAX_PARAMS / 1e6:.0f}M)", fallbacks=[], params=n)
    try:
        torch.manual_seed(seed)
        model = build().eval()
        n = sum(p.numel() for p in model.parameters())
        inputs = make_inputs(model)
        tpu_model = copy.deepcopy(model)
        compile_model = copy.deepcopy(model) if (COMPILE if compiled is None else compiled) else None
        torch.manual_seed(seed)
        expected = _run(model, inputs, seed)
    except Exception as e:
        return dict(status="cpu-invalid", reason=reason_of(e), fallbacks=[], params=n)
    fallbacks = []
    try:
        tpu_model.to("tpu")
        torch_pjrt.reset_stats()
        torch.manual_seed(seed)
        actual = _run(tpu_model, _to_device(inputs, "tpu"), seed)
        fallbacks = sorted(torch_pjrt.stats()["fallbacks"])
        note = ""
        try:
            _compare(actual, expected)
        except AssertionError as mismatch:
            note = _float64_verdict(model, inputs, seed, actual, expected, mismatch)
        result = dict(status="fallback" if fallbacks else "native", reason=note, fallbacks=fallbacks, params=n)
    except Exception as e:
        fallbacks = fallbacks or sorted(torch_pjrt.stats()["fallbacks"])
        result = dict(status="fail", reason=reason_of(e), fallbacks=fallbacks, params=n)
    # The compiled check is forward-only: a model that failed eagerly (most often in the
    # backward) is still compiled, and its entry says whether the forward compiles.
    del tpu_model
    actual = None
    if compile_model is not None:
        want = {k: v for k, v in expected.items() if not k.startswith("grad.")}

        def job():
            result["compiled"] = check_compiled(compile_model, inputs, want, seed, model)
        if _DEFERRED is not None:
            _DEFERRED.append(job)
        else:
            job()
    return result


def _short_op(name):
    """'aten.cummax.default' -> 'cummax', 'aten.index.Tensor' -> 'index.Tensor'."""
    name = name[len("aten."):] if name.startswith("aten.") else name
    return name[:-len(".default")] if name.endswith(".default") else name


def check_compiled(model, inputs, expected, seed, reference=None):
    """Compiles `model` (a CPU model, moved to tpu here) with torch.compile(backend="tpu"), runs
    its forward once in eval mode under no_grad and compares the outputs with `expected` (the
    CPU outputs; float64 decides a float32 mismatch through `reference`, the CPU model).
    Returns {status, graphs, partitions, graph_breaks, splits, split_reasons, reason}: status
    "one program" (every captured graph is one device program), "split" (some op ran eagerly
    between programs) or "fail" (an exception or a mismatch: reason). Dynamo graph breaks,
    which make several graphs of one forward, are counted apart."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    from torch_pjrt import compile as tpu_compile
    torch._dynamo.reset()
    counters.clear()
    tpu_compile.reset_stats()
    reason, actual, mismatch, cpu_compiled_differs = "", None, None, False
    try:
        model.to("tpu")
        for p in model.parameters():
            p.grad = None
        fn = torch.compile(model, backend="tpu")
        torch.manual_seed(seed)
        actual = _run(fn, _to_device(inputs, "tpu"), seed, backward=False)
        try:
            _compare(actual, expected)
        except AssertionError as m:
            if reference is None:
                raise
            mismatch = m
    except Exception as e:
        reason = reason_of(e)
    s = tpu_compile.stats()
    breaks = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    if mismatch is not None:
        try:
            cpu_compiled_differs = _compiled_on_cpu_agrees(reference, inputs, seed, actual, expected)
            if not cpu_compiled_differs:
                _float64_verdict(reference, inputs, seed, actual, expected, mismatch, backward=False)
        except Exception as e:
            reason = reason_of(e)
        torch._dynamo.reset()
    splits = collections.Counter()
    for op, k in s["splits"].items():
        splits[_short_op(op)] += k
    entry = dict(graphs=s["graphs"], partitions=s["partitions"], graph_breaks=breaks,
                 splits=dict(splits.most_common()),
                 split_reasons={_short_op(op): str(why)[:80] for op, why in s["split_reasons"].items()})
    if not reason and not s["graphs"]:
        reason = "Dynamo captured no graph: the forward ran eagerly"
    status = "fail" if reason else "split" if splits else "one program"
    if cpu_compiled_differs:
        entry["cpu_compiled_differs"] = True
    return dict(status=status, reason=reason, **entry)


def _compiled_on_cpu_agrees(reference, inputs, seed, actual, expected):
    """Whether a compiled tpu forward that differs from CPU's eager one equals the same model
    compiled on CPU (torch.compile(backend="eager"): Dynamo's graph run by PyTorch), which then
    differs from eager too: the model's code does something else under torch.compile (a
    Transformers model takes other branches while tracing), so the device is not at fault."""
    cpu_fn = torch.compile(copy.deepcopy(reference).eval(), backend="eager")
    torch.manual_seed(seed)
    cpu_compiled = _run(cpu_fn, inputs, seed, backward=False)
    try:
        _compare(cpu_compiled, expected)
        return False  # CPU's compiled forward is its eager one: the difference is ours
    except AssertionError:
        pass
    try:
        _compare(actual, cpu_compiled)
        return True
    except AssertionError:
        return False


def merge_compiled(entries):
    """One compiled entry for the classes of a model that were compiled (a Transformers base
    model and its head): the worst status, counts summed, `classes` how many."""
    entries = [e for e in entries if e]
    if not entries:
        return None
    for status in ("fail", "split", "one program"):
        hit = [e for e in entries if e["status"] == status]
        if hit:
            break
    splits, reasons = collections.Counter(), {}
    for e in entries:
        splits.update(e.get("splits", {}))
        reasons.update(e.get("split_reasons", {}))
    return dict(status=status, reason=hit[0]["reason"], classes=len(entries),
                graphs=sum(e.get("graphs", 0) for e in entries),
                partitions=sum(e.get("partitions", 0) for e in entries),
                graph_breaks=sum(e.get("graph_breaks", 0) for e in entries),
                splits=dict(splits.most_common()), split_reasons=reasons,
                **({"cpu_compiled_differs": True} if any(e.get("cpu_compiled_differs") for e in entries) else {}))


def _float64_verdict(model, inputs, seed, actual, expected, mismatch, backward=True):
    """For a float32 mismatch, the float64 CPU run decides: deep networks accumulate rounding, and
    CPU's float32 result is not always the nearer one. Passes (returning a note) when the tpu
    result is within tolerance of float64 or no further from it than CPU's float32 result is;
    re-raises `mismatch` otherwise."""
    if "max abs diff" not in str(mismatch) or any(p.dtype != torch.float32 for p in model.parameters()):
        raise mismatch
    try:
        ref = copy.deepcopy(model)
        for p in ref.parameters():
            p.grad = None
        ref.double()
        to64 = (lambda t: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
        torch.manual_seed(seed)
        exact = _run(ref, to64(inputs) if isinstance(inputs, torch.Tensor)
                     else {k: to64(v) for k, v in inputs.items()}, seed, backward)
    except Exception:
        raise mismatch from None
    worst = 0.0
    for name, e in expected.items():
        if not e.is_floating_point() or name not in exact:
            continue
        x = exact[name]
        cpu_err = (e.double() - x).abs().max().item() if e.numel() else 0.0
        tpu_err = (actual[name].double() - x).abs().max().item() if e.numel() else 0.0
        scale = max(1.0, x.abs().max().item()) if x.numel() else 1.0
        if not tpu_err <= max(ATOL * scale, 2 * cpu_err):
            raise mismatch
        worst = max(worst, cpu_err)
    return f"CPU float32 differs from float64 by up to {worst:.3g}; tpu is as near"


def _worst(results):
    """One status for several checked classes: fail > fallback > native; cpu-invalid/skipped
    only when no class ran on CPU."""
    for s in ("fail", "fallback", "native", "skipped", "cpu-invalid"):
        hit = [r for r in results if r["status"] == s]
        if hit:
            return s, hit[0]["reason"]
    return "cpu-invalid", "nothing to run"


def check_transformers(model_type):
    from transformers import AutoConfig
    from transformers.models.auto import modeling_auto
    import transformers
    classes = [("base", modeling_auto.MODEL_MAPPING_NAMES[model_type])]
    for head in HEADS:
        mapping = getattr(modeling_auto, f"MODEL_FOR_{head}_MAPPING_NAMES", {})
        if model_type in mapping:
            classes.append((head, mapping[model_type]))
            break
    parts = {}
    for kind, cls_name in classes:
        cls_name = cls_name[0] if isinstance(cls_name, (list, tuple)) else cls_name
        try:
            cls = getattr(transformers, cls_name)
            config = shrink_config(AutoConfig.for_model(model_type))
        except Exception as e:
            parts[cls_name] = dict(status="cpu-invalid", reason=reason_of(e), fallbacks=[], params=None)
            continue
        parts[cls_name] = check(lambda: cls(copy.deepcopy(config)),
                                lambda m, kind=kind: hf_inputs(m, m.config, kind))
        gc.collect()
    return parts


def check_torchvision(name):
    import torchvision.models

    def build():
        return torchvision.models.get_model(name, weights=None)

    def inputs(model):
        size = 64
        if name.startswith(("vit_", "swin", "maxvit")):  # fixed-size position embeddings/windows
            size = 224
        elif name.startswith("inception"):
            size = 96
        return torch.randn(2, 3, size, size, generator=_gen())
    return {name: check(build, inputs)}


def check_timm(name):
    import timm

    def build():
        return timm.create_model(name, pretrained=False)

    def inputs(model):
        cfg = getattr(model, "pretrained_cfg", {}) or {}
        c, h, w = cfg.get("input_size", (3, 224, 224))
        if not cfg.get("fixed_input_size", False):
            h = w = 64
        return torch.randn(2, c, h, w, generator=_gen())
    return {name: check(build, inputs)}


CHECKERS = {"transformers": check_transformers, "torchvision": check_torchvision, "timm": check_timm}


def check_model(suite, name, on_eager=None):
    """The record of one model: {suite, name, status, reason, fallbacks, classes, seconds} and,
    when some class ran on CPU and COMPILE is on, "compiled" (merge_compiled of the
    classes' entries). Every class runs eagerly first; `on_eager` gets that record (without
    "compiled") before any compiled check starts, so a compile that hangs or crashes the process
    cannot cost the eager result."""
    global _DEFERRED
    import warnings
    started = time.time()
    torch.set_default_dtype(torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _DEFERRED = []
        try:
            try:
                parts = CHECKERS[suite](name)
            except Exception as e:
                parts = {name: dict(status="cpu-invalid", reason=reason_of(e), fallbacks=[], params=None)}
            status, reason = _worst(list(parts.values()))
            fallbacks = sorted({f for p in parts.values() for f in p["fallbacks"]})
            record = dict(suite=suite, name=name, status=status, reason=reason, fallbacks=fallbacks,
                          classes=parts, seconds=round(time.time() - started, 1))
            jobs = _DEFERRED
            if jobs and on_eager:
                on_eager(record)
            for job in jobs:
                job()
                gc.collect()
        finally:
            _DEFERRED = None
    compiled = merge_compiled([p.get("compiled") for p in parts.values()])
    if compiled:
        record["compiled"] = compiled
        record["seconds"] = round(time.time() - started, 1)
    return record


# ----------------------------------------------------------------------------- worker and driver

def worker():
    """Child process: reads {"models": [[suite, name], ...], "compile": bool} as JSON on stdin
    and writes JSON lines on its private stdout: {"start": [suite, name]} before each model,
    {"eager": ...} when its eager part is done and a compiled part follows, and {"record": ...}
    after it."""
    global COMPILE
    emit = _child.protocol()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import transformers
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except ImportError:
        pass
    job = json.load(sys.stdin)
    COMPILE = job["compile"]
    for suite, name in job["models"]:
        emit(start=[suite, name])
        record = check_model(suite, name, lambda rec: emit(eager=rec))
        emit(record=record)
        gc.collect()


def _drive(todo, timeout, on_record, deadline=None, compiled=True):
    """Runs the (suite, name) pairs in `todo` through worker processes, one after another; past
    `deadline` (a time.time() value) it stops after the model in progress. A model whose worker
    dies or times out in its compiled part keeps its eager result, the compiled entry failed."""
    todo = list(todo)

    def wait():  # a model has `timeout` s from its start; the next may start a minute after that
        spent = time.time() - started
        return max(1.0, timeout + 60 - spent) if current is None else max(0.1, timeout - spent)

    while todo and not (deadline and time.time() > deadline):
        child = _child.Child("compat.py", "models-worker", job={"models": todo, "compile": compiled},
                             env=_child.child_env(HF_HUB_OFFLINE="1"))
        current, started, eager = None, time.time(), None
        for msg in child.messages(wait):
            if "start" in msg:
                current, started, eager = tuple(msg["start"]), time.time(), None
            elif "eager" in msg:
                eager = msg["eager"]
            elif "record" in msg:
                on_record(msg["record"])
                todo.remove((msg["record"]["suite"], msg["record"]["name"]))
                current = eager = None
                if deadline and time.time() > deadline:
                    child.kill()
                    return
        if not todo:
            break
        why = child.lost(timeout)
        lost = current or todo[0]
        if eager is not None and current is not None:
            on_record(dict(eager, compiled=dict(status="fail", reason=why, graphs=0, partitions=0,
                                                graph_breaks=0, splits={}, split_reasons={})))
        else:
            on_record(dict(suite=lost[0], name=lost[1], status="fail", reason=why, fallbacks=[],
                           classes={}, seconds=None))
        todo.remove(lost)


def sweep(models, timeout, jobs, progress_path=None, deadline=None, compiled=True):
    """Runs `models` over `jobs` drivers; returns the records in `models` order. Each record is
    also appended to `progress_path` (JSON lines) as it comes, so a long run leaves its results."""
    records, lock, started = [], threading.Lock(), time.time()
    progress = open(progress_path, "a", buffering=1) if progress_path else None

    def on_record(rec):
        with lock:
            records.append(rec)
            if progress:
                progress.write(json.dumps(rec) + "\n")
            c = rec.get("compiled")
            c = f" | compiled: {_compiled_cell(c)[:100]}" if c else ""
            print(f"[{len(records)}/{len(models)} {time.time() - started:6.0f}s] {rec['suite']}/{rec['name']}: "
                  f"{rec['status']} {rec['reason'][:100]}{c}", file=sys.stderr, flush=True)

    _child.in_parallel(lambda share: _drive(share, timeout, on_record, deadline, compiled), models, jobs)
    if progress:
        progress.close()
    order = {m: i for i, m in enumerate(models)}
    records.sort(key=lambda r: order[r["suite"], r["name"]])
    return records


# ----------------------------------------------------------------------------- report

def totals(records, suite):
    counts = collections.Counter(r["status"] for r in records if r["suite"] == suite)
    ran = sum(counts[s] for s in COUNTED)
    return dict(models=sum(counts.values()), ran_on_cpu=ran, **{s: counts[s] for s in COUNTED + ("cpu-invalid", "skipped")},
                matched_pct=round(100 * (counts["native"] + counts["fallback"]) / ran, 1) if ran else None)


def _compiled_cell(c):
    """The compiled column of one model: "one program", "split: op (n), ..." or "fail: reason",
    with the graph count and Dynamo's graph breaks where the forward made several graphs."""
    if not c:
        return "-"
    graphs, classes = "", c.get("classes", 1)
    if c.get("graphs", 0) > classes or c.get("graph_breaks"):
        graphs = (f" ({c['graphs']} graphs" + (f" for {classes} classes" if classes > 1 else "")
                  + f", {c.get('graph_breaks', 0)} graph breaks)")
    mark = " (‡)" if c.get("cpu_compiled_differs") else ""
    if c["status"] == "one program":
        return ("one program per graph" if graphs else "one program") + graphs + mark
    if c["status"] == "split":
        return "split: " + ", ".join(f"{op} ({n})" for op, n in c["splits"].items()) + graphs + mark
    return f"fail: {c['reason']}"


def compiled_totals(records, suite):
    """Per suite: how many models compiled to one program, split or failed, and not compiled
    (ran on CPU, no entry); the ops that split, by number of models."""
    rows = [r for r in records if r["suite"] == suite and r["status"] in COUNTED]
    counts = collections.Counter(r["compiled"]["status"] if r.get("compiled") else "-" for r in rows)
    ops = collections.Counter(op for r in rows if r.get("compiled") for op in r["compiled"].get("splits", {}))
    breaks = sum(1 for r in rows if r.get("compiled") and r["compiled"]["status"] != "fail"
                 and r["compiled"].get("graph_breaks"))
    return dict(one_program=counts["one program"], split=counts["split"], fail=counts["fail"],
                not_compiled=counts["-"], with_graph_breaks=breaks, split_ops=dict(ops.most_common()))


def render_models(doc):
    """The '## Models' section of COMPAT.md from models.json's content."""
    records = doc["models"]
    suites = [s for s in SUITES if any(r["suite"] == s for r in records)]
    out = ["## Models", "",
           f"Generated by `{doc['command']}` with torch {doc['torch']}, "
           + ", ".join(f"{k} {v}" for k, v in doc.get("versions", {}).items()) + f", on {doc['date']} "
           f"({doc.get('seconds', '?')} s). Each model built from a tiny config (Transformers) or "
           "without weights (torchvision, timm), run forward and backward on CPU and on tpu from "
           "the same weights; outputs and every parameter gradient compared (float32: rtol 1e-4, "
           "atol 1e-4 x the largest reference magnitude). **matched** = native + fallback, as a "
           "share of the models that run on CPU. Details per model: `compat/models.json`.", "",
           "| suite | models | run on CPU | native | fallback | fail | matched | cpu-invalid | skipped |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    if doc.get("not_run"):
        out.insert(4, f"**{len(doc['not_run'])} of the {doc['enumerated']} models enumerated were not run** "
                      "(the run's time limit; the order is a fixed shuffle, so the rest is a fair "
                      "sample). Continue with `--resume`.")
        out.insert(5, "")
    for s in suites:
        t = totals(records, s)
        out.append(f"| {s} | {t['models']} | {t['ran_on_cpu']} | {t['native']} | {t['fallback']} | "
                   f"{t['fail']} | {t['matched_pct']}% | {t['cpu-invalid']} | {t['skipped']} |")
    compiled = [(s, compiled_totals(records, s)) for s in suites]
    compiled = [(s, t) for s, t in compiled if t["one_program"] + t["split"] + t["fail"]]
    if compiled:
        out += ["", "Compiled: each model that runs on CPU is compiled again from the same weights "
                "with `torch.compile(model, backend=\"tpu\")` and run forward once (eval mode, "
                "no_grad), outputs compared with CPU's as above (a model that fails eagerly, "
                "often in the backward only, is compiled too). **one program**: every graph "
                "Dynamo captured became one device program; **split**: an op with no graph "
                "lowering ran eagerly between programs (op (count of splits)); Dynamo's own graph "
                "breaks are counted apart. `-`: not compiled in this run. ‡: the outputs differ "
                "from CPU's eager ones, and equal those of the model compiled on CPU "
                "(`backend=\"eager\"`), which differ the same way: the model's code does "
                "something else under torch.compile.", ""]
        for s, t in compiled:
            ops = ", ".join(f"`{op}` ({n})" for op, n in list(t["split_ops"].items())[:8])
            line = (f"- {s}: {t['one_program']} one program, {t['split']} split, {t['fail']} fail"
                    + (f", {t['not_compiled']} not compiled" if t["not_compiled"] else "")
                    + (f"; {t['with_graph_breaks']} with Dynamo graph breaks" if t["with_graph_breaks"] else ""))
            out.append(line + (f". Ops that split, by number of models: {ops}" if ops else ""))
    fell = collections.Counter(f for r in records if r["status"] == "fallback" for f in r["fallbacks"])
    if fell:
        out += ["", "Ops that fell back, by number of models: "
                + ", ".join(f"`{op}` ({n})" for op, n in fell.most_common()), ""]
    reasons = collections.Counter(_short_reason(r["reason"]) for r in records if r["status"] == "fail")
    if reasons:
        out += ["", "### Top failure reasons", "", "| models | reason |", "| ---: | --- |"]
        out += [f"| {n} | {_child.md(why)} |" for why, n in reasons.most_common(15)]
    for s in suites:
        out += ["", f"### {s}", "", "| model | status | detail | compiled |", "| --- | --- | --- | --- |"]
        for r in records:
            if r["suite"] != s:
                continue
            detail = r["reason"] if r["status"] != "fallback" else ", ".join(r["fallbacks"])
            out.append(f"| {r['name']} | {r['status']} | {_child.md(detail)[:160]} | {_child.md(_compiled_cell(r.get('compiled')))[:160]} |")
    return "\n".join(out) + "\n"


def _short_reason(reason):
    """A failure reason without the model-specific part (shapes, names, numbers)."""
    import re
    text = re.sub(r"^(out|grad)\.[\w.\[\]]+: ", r"\1: ", reason)
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:120]


def versions():
    found = {}
    for pkg in ("transformers", "torchvision", "timm"):
        try:
            found[pkg] = __import__(pkg).__version__
        except ImportError:
            pass
    return found


def write(doc, out_dir):
    path = os.path.join(out_dir, "models.json")
    os.makedirs(out_dir, exist_ok=True)
    head = json.dumps({k: v for k, v in doc.items() if k != "models"})[:-1]
    with open(path, "w") as f:
        f.write(head + ', "models": [\n' + ",\n".join(json.dumps(r) for r in doc["models"]) + "\n]}\n")
    return path


def load_progress(path):
    """The records of an earlier run's progress file, the last one per model."""
    done = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    done[rec["suite"], rec["name"]] = rec
    return done


def run(suites, only, limit, jobs, timeout, command, progress_path=None, shuffle=False,
        resume=False, time_limit=None, compiled=True):
    """Enumerates and runs the models; returns the models.json document. With `resume`, models
    that the progress file already holds are not run again, except cpu-invalid ones (those
    usually mean the harness's tiny config or inputs need work), with `compiled` those that ran
    on CPU but whose record has no compiled entry yet, or, with `only`, the named ones; with `time_limit`
    (seconds) no model starts after it, and the document counts the models not run."""
    models = []
    for suite in suites:
        try:
            names = list_models(suite)
        except ImportError as e:
            print(f"{suite}: not installed ({e}); skipped", file=sys.stderr)
            continue
        n_max = limit.get(suite, limit.get("*")) if isinstance(limit, dict) else limit
        models += [(suite, n) for n in names[:n_max]]
    if shuffle:  # a fixed order that mixes suites and names: a cut-short run is a fair sample
        import random
        random.Random(0).shuffle(models)
    def named(suite, name):
        return not only or name in only or f"{suite}/{name}" in only

    if resume:  # rerun what --only names, else what is missing or cpu-invalid; keep the rest
        previous = load_progress(progress_path)
        def stale(rec):
            return rec["status"] == "cpu-invalid" or (
                compiled and rec["status"] in COUNTED and "compiled" not in rec)
        todo = [m for m in models if (named(*m) if only else m not in previous or stale(previous[m]))]
        kept = {m: previous[m] for m in models if m in previous and m not in todo}
        fallback_records = previous  # a model named again but cut off by the time limit keeps its record
    else:
        if progress_path and os.path.exists(progress_path):
            os.remove(progress_path)
        models = [m for m in models if named(*m)]
        todo, kept, fallback_records = models, {}, {}
    started = time.time()
    deadline = started + time_limit if time_limit else None
    fresh = {(r["suite"], r["name"]): r for r in sweep(todo, timeout, jobs, progress_path, deadline, compiled)}
    seconds = round(time.time() - started)
    kept.update({m: fallback_records[m] for m in todo if m not in fresh and m in fallback_records})
    records = [kept.get(m) or fresh[m] for m in models if m in kept or m in fresh]
    not_run = [f"{s}/{n}" for s, n in models if (s, n) not in kept and (s, n) not in fresh]
    totals_by_suite = {s: totals(records, s) for s in suites if any(r["suite"] == s for r in records)}
    print(f"{len(models)} models in {seconds} s: {json.dumps(totals_by_suite)}", file=sys.stderr)
    return dict(command=command, torch=torch.__version__, versions=versions(), date=time.strftime("%Y-%m-%d"),
                seconds=seconds, jobs=jobs, timeout=timeout, compiled=compiled,
                enumerated=len(models), not_run=not_run,
                totals=totals_by_suite, models=records)
