"""Module compatibility sweep: PyTorch's ModuleInfo database (nn.Module classes) on "tpu" against CPU.

    python tools/compat.py modules [--modules NAME,...] [--dtypes float32,...] [--samples N]
                                   [--shard i/n] [--timeout S] [--jobs N] [--update]
                                   [--out DIR] [--md PATH]

The op sweep (compat.py) calls functions; users build modules, and a module's forward strings ops
together in ways no single OpInfo sample does (nn.LSTM's flattened weights, nn.MultiheadAttention's
packed projections, BatchNorm's running statistics). For each ModuleInfo of
`torch.testing._internal.common_modules.module_db`, each dtype it declares among those asked for,
each mode (training, plus eval when the ModuleInfo says `train_and_eval_differ`) and up to N of the
module inputs its `module_inputs_func` makes (spread evenly over its list when it has more), two
cases run:

    <mode>.forward   the module is built on CPU from a fixed seed, converted to the dtype and put in
                     the mode, then deep-copied and moved with `.to("tpu")` (tensors the constructor
                     kept as plain attributes are moved too, as building it from device tensors
                     would); both run forward on their copy of the forward input. The outputs and
                     the buffers afterwards (running statistics) are compared.
    <mode>.backward  the same, then the gradients of a randomly weighted sum of the differentiable
                     outputs (the same weights on both sides) with respect to the floating inputs
                     and every parameter are compared.

Lazy modules are materialized by one forward on each side and given CPU's parameters. Comparison
and statuses (native / fallback with the ops that fell back / fail / cpu-invalid) are the op
sweep's: assert_close with the dtype's default tolerances, widened only by the ModuleInfo's own
CPU tolerance overrides. A mismatch below float64 also says how far each side lies from the same
case run in float64 on CPU, on the tensor where they differ most (which side rounding favours
when the difference is a few ulps of summation order). The cases run in the op sweep's child
processes (compat.drive), and go to DIR/modules.json and the "Modules" section of COMPAT.md.
"""
import collections
import copy
import zlib

import torch

import _child
import compat


def load_module_db():
    from torch.testing._internal.common_modules import module_db
    return module_db


def select_modules(module_db, names=None, shard=(0, 1)):
    """The ModuleInfos named (`nn.LSTM` or `LSTM`), or all, then every n-th one for shard i/n."""
    wanted = set(names or [])
    infos = [m for m in module_db
             if not wanted or m.name in wanted or m.name.split(".")[-1] in wanted]
    i, n = shard
    return infos[i::n]


def modes(info):
    return ("train", "eval") if info.train_and_eval_differ else ("train",)


def spread(count, limit):
    """Indices of at most `limit` of `count` items, evenly spaced, first and last included."""
    if count <= limit:
        return list(range(count))
    if limit == 1:
        return [0]
    return sorted({round(k * (count - 1) / (limit - 1)) for k in range(limit)})


def _side_inputs(forward_input, device):
    """One side's (args, kwargs) of a module input: tensors copied to `device`, requires_grad kept."""
    def move(t):
        moved = t.detach().clone() if device == "cpu" else t.detach().to(device)
        return moved.requires_grad_() if t.requires_grad else moved
    return compat._tree_map(move, (forward_input.args, forward_input.kwargs))


def _move_attributes(module, device):
    """Moves the CPU tensors modules keep as plain attributes (not parameters or buffers)."""
    for m in module.modules():
        for key, value in list(vars(m).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                setattr(m, key, value.to(device))


def _build(info, module_input, dtype, training, seed):
    cons = copy.deepcopy(module_input.constructor_input)
    torch.manual_seed(seed)
    module = info.module_cls(*cons.args, **cons.kwargs)
    module.to(dtype)
    module.train(training)
    return module


def _forward(module, args, kwargs, seed):
    torch.manual_seed(seed)
    return module(*args, **kwargs)


def _result(module, args, kwargs, out, variant, seed, weight_dtype=None):
    """What a case compares: outputs and buffers (forward), or input and parameter gradients of a
    weighted sum of the outputs (backward; the weights drawn in `weight_dtype`, by default each
    output's)."""
    if variant == "forward":
        return {"output": out, "buffers": dict(module.named_buffers())}
    outs = [t for t in compat._tensors(out) if t.requires_grad]
    inputs = [t for t in compat._tensors((args, kwargs)) if t.requires_grad]
    params = [(k, p) for k, p in module.named_parameters() if p.requires_grad]
    if not outs or not (inputs or params):
        raise compat.NotApplicable("no differentiable output, or nothing to differentiate")
    gen = torch.Generator().manual_seed(seed)  # same weights on both sides, made on CPU
    weights = [torch.randn(t.shape, dtype=weight_dtype or t.dtype, generator=gen).to(t.device, t.dtype)
               for t in outs]
    grads = torch.autograd.grad(outs, inputs + [p for _, p in params], weights, allow_unused=True)
    return {"input grads": list(grads[:len(inputs)]),
            "parameter grads": {k: g for (k, _), g in zip(params, grads[len(inputs):])}}


def reason_of(exc):
    """compat.reason_of, plus where in the compared structure an assert_close mismatch lies."""
    text = compat.reason_of(exc)
    where = [ln.strip() for ln in str(exc).splitlines() if ln.strip().startswith("The failure occurred for item")]
    if where:
        text += "; at " + where[0].split("item", 1)[1].strip().rstrip(".")
    return text[:300]


def _floating_leaves(tree):
    from torch.utils._pytree import tree_leaves
    return [t.detach().cpu().double() for t in tree_leaves(tree)
            if isinstance(t, torch.Tensor) and t.is_floating_point()]


def float64_note(info, module_input, dtype, training, variant, seed, actual, expected):
    """For a mismatch below float64: how far each side lies from the same case computed in
    float64 on CPU (the module built the same way, then converted), on the tensor where the two
    sides differ most, as '; float64 check ...', or '' when that cannot be told (another
    structure, NaN, a lazy module, an error)."""
    from torch.testing._comparison import default_tolerances
    try:
        module = _build(info, module_input, dtype, training, seed).to(torch.float64)
        args, kwargs = _side_inputs(module_input.forward_input, "cpu")
        args, kwargs = compat._tree_map(
            lambda t: t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point() else t,
            (args, kwargs))
        if info.is_lazy:
            return ""
        ref = _result(module, args, kwargs, _forward(module, args, kwargs, seed), variant, seed, dtype)
        ref, a, e = (_floating_leaves(x) for x in (ref, actual, expected))
        if len(ref) != len(a) or len(ref) != len(e) or any(x.shape != y.shape for x, y in zip(ref, a)):
            return ""
        atol, rtol = compat.tolerance(info, dtype) or default_tolerances(dtype)

        def excess(k):  # how far past the tolerance the two sides differ in tensor k
            return ((a[k] - e[k]).abs() / (atol + rtol * e[k].abs())).max().item()
        worst = max((k for k in range(len(ref)) if ref[k].numel()), key=excess)
        tpu, cpu = ((x[worst] - ref[worst]).abs().max().item() for x in (a, e))
        if tpu != tpu or cpu != cpu:  # NaN somewhere
            return ""
        return f"; float64 check of that tensor: tpu {tpu:.2g} from float64, CPU {cpu:.2g}"
    except Exception:
        return ""


def run_module_case(info, module_input, dtype, mode, variant, seed):
    """One case ('forward' or 'backward' in `mode`). Returns (status, reason, fallback op names),
    or None when it does not apply."""
    import torch_pjrt
    training = mode == "train"
    try:
        cpu = _build(info, module_input, dtype, training, seed)
        for_tpu = copy.deepcopy(cpu)
        args, kwargs = _side_inputs(module_input.forward_input, "cpu")
        if info.is_lazy:  # materialize; the tpu copy gets these parameters after its own
            with torch.no_grad():
                _forward(cpu, args, kwargs, seed)
            state = {k: v.detach().clone() for k, v in cpu.state_dict().items()}
        expected = _result(cpu, args, kwargs, _forward(cpu, args, kwargs, seed), variant, seed)
    except compat.NotApplicable:
        return None
    except Exception as e:
        return "cpu-invalid", reason_of(e), []
    compat.cpu_done()
    fallbacks, actual = [], None
    try:
        torch_pjrt.reset_stats()
        module = for_tpu.to("tpu")
        _move_attributes(module, "tpu")
        args, kwargs = _side_inputs(module_input.forward_input, "tpu")
        if info.is_lazy:
            with torch.no_grad():
                _forward(module, args, kwargs, seed)
            module.load_state_dict(state)
        actual = compat.to_host(_result(module, args, kwargs, _forward(module, args, kwargs, seed), variant, seed))
        fallbacks = sorted(torch_pjrt.stats()["fallbacks"])
        compat.compare(actual, compat._tree_map(torch.Tensor.detach, expected), compat.tolerance(info, dtype))
    except AssertionError as e:
        note = ""
        if actual is not None and dtype != torch.float64:
            note = float64_note(info, module_input, dtype, training, variant, seed, actual, expected)
        return "fail", reason_of(e) + note, fallbacks or sorted(torch_pjrt.stats()["fallbacks"])
    except Exception as e:
        return "fail", reason_of(e), fallbacks or sorted(torch_pjrt.stats()["fallbacks"])
    return ("fallback" if fallbacks else "native"), "", fallbacks


def module_cases(info, name, job, begin):
    """The records of one ModuleInfo (compat.worker's case generator for the "modules" tier)."""
    supported = info.supported_dtypes("cpu")
    for dtype_name in job["dtypes"]:
        dtype = getattr(torch, dtype_name)
        if dtype not in supported:
            continue
        for mode in modes(info):
            try:
                torch.manual_seed(0)
                inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                                 training=mode == "train")
            except Exception as e:
                yield dict(op=name, variant=f"{mode}.*", dtype=dtype_name, sample=-1, status="cpu-invalid",
                           reason="module_inputs_func: " + reason_of(e), fallbacks=[])
                continue
            for index in spread(len(inputs), job["samples"]):
                valid = False
                for variant in ("forward", "backward"):
                    cid = compat.case_id(name, dtype_name, index, f"{mode}.{variant}")
                    if variant == "backward" and not valid:
                        break  # forward is invalid on CPU (or crashed): nothing else to try
                    if not begin(cid):
                        continue
                    outcome = run_module_case(info, inputs[index], dtype, mode, variant,
                                              zlib.crc32(cid.encode()))
                    if outcome is None:
                        continue
                    status, reason, fallbacks = outcome
                    valid = valid or status != "cpu-invalid"
                    yield dict(op=name, variant=f"{mode}.{variant}", dtype=dtype_name, sample=index,
                               desc=inputs[index].desc, status=status, reason=reason, fallbacks=fallbacks)


def render_modules(doc):
    """The '## Modules' section of COMPAT.md from modules.json's content."""
    records = doc["cases"]
    dtypes = compat.dtype_order(records)
    by = collections.defaultdict(list)
    for r in records:
        by[r["op"], r["dtype"]].append(r)
    counted = {r["op"] for r in records if r["status"] in compat.COUNTED}
    fails = sorted({r["op"] for r in records if r["status"] == "fail"})
    fell = sorted({r["op"] for r in records if r["status"] == "fallback"} - set(fails))
    out = ["## Modules", "",
           f"Generated by `{doc['command']}` with torch {doc['torch']}, on {doc['date']} "
           f"({doc.get('seconds', '?')} s).{compat.updates_text(doc)} Each ModuleInfo of PyTorch's `module_db`, "
           "each dtype it declares, "
           f"up to {doc['samples']} of its module inputs, in training mode and, where the ModuleInfo says "
           "train and eval differ, eval mode: the module built on CPU, deep-copied to tpu, forward "
           "(outputs and buffers compared) and backward of a randomly weighted sum of the outputs "
           "(input and parameter gradients compared). Statuses as for ops. Details per case: "
           "`compat/modules.json`.", "",
           *compat.summary_table(records, dtypes), "",
           f"{len(counted)} modules ran: {len(fails)} fail in some case; of the others, {len(fell)} "
           "pass with some op falling back to CPU.", "",
           "### Per module", "", "| module | " + " | ".join(dtypes) + " |", "| --- |" + " --- |" * len(dtypes)]
    for name in sorted({r["op"] for r in records}):
        out.append(f"| {name} | " + " | ".join(_child.md(compat.cell(by[name, d])) for d in dtypes) + " |")
    out += ["", f"### Modules: failing ({len(fails)})", "", *compat.failure_list(records)]
    fallback = collections.defaultdict(set)
    for r in records:
        if r["status"] in ("fallback", "fail"):
            fallback[r["op"]].update(r["fallbacks"])
    fallback = {k: v for k, v in fallback.items() if v}
    out += ["", f"### Modules: ops that fell back ({len(fallback)} modules)", ""]
    out += [f"- `{name}`: " + ", ".join(f"`{op}`" for op in sorted(ops)) for name, ops in sorted(fallback.items())]
    if not fallback:
        out.append("None.")
    return "\n".join(out) + "\n"
