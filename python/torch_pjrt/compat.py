"""Op compatibility sweep: PyTorch's OpInfo database run on the "tpu" device against the CPU oracle.

    python -m torch_pjrt.compat ops [--quick] [--shard i/n] [--ops NAME,...] [--dtypes float32,...]
                                    [--samples N] [--timeout S] [--jobs N] [--out DIR] [--md PATH]
    python -m torch_pjrt.compat merge [--out DIR] [--md PATH]
    python -m torch_pjrt.compat models ...   (the model harness: see compat_models.py)

For every OpInfo, every dtype it supports on CPU and each of its first sample inputs, a case is one
variant of the call: `function`, `noncontiguous` (the same inputs as strided views), `inplace`,
`out` and `backward` (gradients of a randomly weighted sum of the outputs). The CPU result is the
oracle; the tpu result must match it with `torch.testing.assert_close` (default dtype-aware
tolerances, widened only by the OpInfo's own CPU tolerance overrides, equal_nan, exact dtype and
shape). Each case ends as:

    native       passed, and no op fell back to CPU during the tpu call
    fallback     passed, but some op ran through the CPU fallback (their names are recorded)
    fail         mismatch or exception on tpu (first line of the reason), or a crash / timeout
    cpu-invalid  the CPU call itself raised: the case is recorded but not counted

The cases run in child processes (`worker`) that stream JSON lines back; a child that crashes or
hangs costs only its current case, and a new child resumes after it. Results go to DIR/ops.json
(or DIR/ops.shard-i-of-n.json with --shard; `merge` combines the shards) and to COMPAT.md.
COMPAT.md is rendered from DIR/ops.json and, when present, DIR/models.json (its "Models"
section), so either sweep rewrites it without losing the other's results.
"""
import argparse
import collections
import glob
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
import zlib

import torch

DTYPES = ["float32", "bfloat16", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"]
VARIANTS = ["function", "noncontiguous", "inplace", "out", "backward"]
COUNTED = ("native", "fallback", "fail")
QUICK_OPS = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "tanh",
    "sigmoid", "pow", "maximum", "minimum", "clamp", "where", "eq", "lt", "sum", "mean", "amax",
    "argmax", "cumsum", "mm", "matmul", "addmm", "bmm", "softmax", "nn.functional.relu",
    "nn.functional.gelu", "nn.functional.linear", "nn.functional.layer_norm", "reshape",
    "transpose", "permute", "cat", "index_select", "masked_fill",
]
DEFAULT_SAMPLES, QUICK_SAMPLES = 8, 2
MAX_CRASHES_PER_OP = 3
SHAPES_ONLY = "shapes and dtypes only: the output is random or uninitialized"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ----------------------------------------------------------------------------- the OpInfo side

def load_op_db():
    """PyTorch's OpInfo list (its test utilities need the pinned `expecttest`)."""
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def op_name(op):
    """Unique name of an OpInfo: its name, plus '.variant' for the named variants."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select_ops(op_db, names=None, quick=False, shard=(0, 1)):
    """The OpInfos to sweep, in op_db order: those named (by full or base name) or the quick set,
    then every n-th one for shard i/n."""
    wanted = set(names or (QUICK_OPS if quick else []))
    ops = [op for op in op_db if not wanted or op_name(op) in wanted or op.name in wanted]
    i, n = shard
    return ops[i::n]


def _decorate_infos(op, dtype):
    """The DecorateInfos of `op` that apply on CPU to `dtype`."""
    from torch.testing._internal.opinfo.core import DecorateInfo
    for info in op.decorators:
        if not isinstance(info, DecorateInfo) or not info.active_if:
            continue
        devices = info.device_type if isinstance(info.device_type, (tuple, list)) else (info.device_type,)
        if (None in devices or "cpu" in devices) and (info.dtypes is None or dtype in info.dtypes):
            yield info


def tolerance(op, dtype):
    """(atol, rtol) widened by the OpInfo's own toleranceOverride/precisionOverride for CPU and
    `dtype` (any test), or None to keep assert_close's per-dtype defaults."""
    from torch.testing._comparison import default_tolerances
    atol, rtol = default_tolerances(dtype)
    widened = False
    for info in _decorate_infos(op, dtype):
        for dec in info.decorators:
            kind = type(dec).__name__
            if kind == "toleranceOverride" and dtype in dec.d:
                atol, rtol = max(atol, dec.d[dtype].atol), max(rtol, dec.d[dtype].rtol)
                widened = True
            elif kind == "precisionOverride" and dtype in dec.d:
                atol, widened = max(atol, dec.d[dtype]), True
    return (atol, rtol) if widened else None


# Random factories whose OpInfo seeds the global generator and declares nothing more: their values
# come from the device's own generator on tpu (as on CUDA), so they cannot equal CPU's draws.
DEVICE_RNG_OPS = {"randn", "randint"}


def values_comparable(op):
    """False for ops whose values cannot match CPU (random or uninitialized outputs), as the OpInfo
    declares by has_nondeterministic_output or by skipping TestCommon.test_compare_cpu; for those
    only dtypes and shapes are compared."""
    if op.has_nondeterministic_output or op.name in DEVICE_RNG_OPS:
        return False
    for info in op.decorators:
        skips = [d for d in getattr(info, "decorators", []) if "skip" in getattr(d, "__qualname__", "")]
        if getattr(info, "test_name", None) == "test_compare_cpu" and skips and info.device_type is None:
            return False
    return True


# Value mismatches whose cause has been traced and lies outside the lowering's arithmetic (CPU's
# own rounding order, a decomposition PyTorch applies): {(op, dtype): (variants, cause)}. They
# stay failures; COMPAT.md gives the cause before the mismatch.
_COL2IM = ("CPU accumulates the overlapping taps (col2im) in bfloat16; the tpu rounds once from "
           "float and is nearer the float64 result")
_STRIDED_BN = ("CPU's kernel for strided input rounds the per-channel scale and shift to bfloat16; "
               "its contiguous kernel does not, and the tpu matches that one bit for bit")
KNOWN_CAUSES = {
    **{(f"nn.functional.conv_transpose{d}d", "bfloat16"): (("function", "noncontiguous"), _COL2IM)
       for d in (1, 2, 3)},
    ("nn.functional.conv_transpose3d", "float32"): (
        ("function", "noncontiguous"),
        "summation order: CPU and tpu are both a few float32 ulps from float64 where terms cancel"),
    ("nn.functional.conv2d", "bfloat16"): (("backward",), _COL2IM + " (grad_input)"),
    **{(name, "bfloat16"): (("noncontiguous",), _STRIDED_BN)
       for name in ("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
                    "nn.functional.batch_norm")},
    ("nn.functional.instance_norm", "bfloat16"): (
        ("function", "noncontiguous"),
        "the bfloat16 saved statistics are one ulp from CPU's on some channels (CPU's reduction "
        "and rounding of the sum of squares is not reproduced bit for bit)"),
    **{(name, "bfloat16"): (
        ("function", "noncontiguous"),
        "group_norm has no tpu lowering: PyTorch's decomposition (var_mean, rsqrt, sub, mul in "
        "bfloat16) rounds each step, CPU's fused kernel computes in float and rounds once")
       for name in ("native_group_norm", "nn.functional.group_norm")},
    **{(name, "bfloat16"): (
        ("function", "noncontiguous", "backward"),
        "one bfloat16 ulp: the loss is a chain of bfloat16 ops (linear, log_softmax, the "
        "weighted sum) and CPU's kernels round some intermediates at other steps")
       for name in ("nn.functional.cross_entropy", "nn.functional.linear_cross_entropy",
                    "nn.functional.linear_cross_entropy.chunked_none")},
    ("kron", "float32"): (("backward",), "summation order of the gradient's reduction (2 float32 ulps)"),
    ("erfinv", "float32"): (
        ("backward",),
        "XLA's float32 erfinv is a few ulps from CPU's near +-1, and the gradient "
        "exp(erfinv(x)^2) amplifies it"),
}


def known_cause(name, dtype, variant):
    variants, cause = KNOWN_CAUSES.get((name, dtype), ((), None))
    return cause if variant in variants else None


# ----------------------------------------------------------------------------- one case

class NotApplicable(Exception):
    """The variant does not apply to this sample (no in-place form, nothing differentiable...)."""


def _tree_map(fn, tree):
    from torch.utils._pytree import tree_map_only
    return tree_map_only(torch.Tensor, fn, tree)


def _tensors(tree):
    from torch.utils._pytree import tree_leaves
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def host_tensors(op, dtype, count):
    """For each of the first `count` samples, the positions (in tree order) of the tensors the
    OpInfo makes on CPU whatever device it is asked for, as tensor_split's indices: those stay on
    CPU on the device side too, as they do when PyTorch tests CUDA. Found by making the samples on
    the meta device; empty sets when that fails or the samples differ in structure."""
    try:
        torch.manual_seed(0)
        made = list(itertools.islice(op.sample_inputs("meta", dtype, requires_grad=False), count))
    except Exception:
        return [frozenset()] * count
    return [frozenset(i for i, t in enumerate(_tensors((s.input, s.args, s.kwargs))) if t.device.type == "cpu")
            for s in made] + [frozenset()] * (count - len(made))


class Inputs:
    """One side's copy of a sample: input, args, kwargs, plus what the variant needs. On the
    device side, the tensors at positions `on_host` stay on CPU."""

    def __init__(self, sample, device, variant, ref, on_host=frozenset()):
        from torch.utils._pytree import tree_flatten, tree_unflatten
        from torch.testing._internal.common_utils import noncontiguous_like
        self.device = device
        leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        tensors = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)]
        for k, i in enumerate(tensors):
            t = leaves[i].detach()
            leaves[i] = t.clone() if device == "cpu" or k in on_host else t.to(device)
        self.input, self.args, self.kwargs = tree_unflatten(leaves, spec)
        if "device" in self.kwargs:  # factory functions: make them on this side's device
            self.kwargs["device"] = device
        # A device argument names the device the samples were made for (`to(device, dtype)`): on
        # CUDA the OpInfo passes cuda there, so this side passes its own.
        self.args = tuple(device if isinstance(a, (str, torch.device)) and str(a) == "cpu" else a
                          for a in self.args)  # (noncontiguous_like below keeps each tensor's device)
        if variant == "noncontiguous":
            self.input, self.args, self.kwargs = _tree_map(noncontiguous_like, (self.input, self.args, self.kwargs))
        if variant == "out":
            self.kwargs["out"] = _tree_map(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device), ref)
        self.leaves = []
        if variant == "backward":
            self.leaves = [t.requires_grad_() for t in _tensors((self.input, self.args, self.kwargs))
                           if t.is_floating_point()]
        self.output_process_fn_grad = sample.output_process_fn_grad


def call_variant(op, variant, x, seed):
    """Runs `variant` of `op` on prepared Inputs `x`; returns what is compared with the oracle."""
    def call(**extra):
        return op(x.input, *x.args, **x.kwargs, **extra)

    if variant in ("function", "noncontiguous"):
        return call()
    if variant == "out":
        call()
        return x.kwargs["out"]
    if variant == "inplace":
        result = op.inplace_variant(x.input, *x.args, **x.kwargs)
        if result is not x.input:
            raise AssertionError("the in-place variant did not return its input")
        return x.input
    if variant == "backward":
        outs = [t for t in _tensors(x.output_process_fn_grad(call())) if t.requires_grad]
        if not x.leaves or not outs:
            raise NotApplicable("no floating input or no differentiable output")
        gen = torch.Generator().manual_seed(seed)  # same weights on both sides, made on CPU
        weights = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(t.device) for t in outs]
        return torch.autograd.grad(outs, x.leaves, weights, allow_unused=True)
    raise ValueError(f"unknown variant {variant}")


def variant_applies(op, variant, dtype):
    """Whether the OpInfo declares `variant` at all for `dtype`."""
    if variant == "inplace":
        return op.inplace_variant is not None
    if variant == "out":
        return op.supports_out
    if variant == "backward":
        return op.supports_autograd and dtype.is_floating_point
    return True


def to_host(result):
    """The tpu result with every tensor copied to CPU; a tensor left on another device is an error."""
    def host(t):
        if t.device.type != "tpu":
            raise AssertionError(f"a result tensor is on {t.device}, not on tpu")
        return t.detach().cpu()
    return _tree_map(host, result)


def compare(actual, expected, tol, values=True):
    """assert_close with exact dtypes and shapes, equal_nan, and `tol` = (atol, rtol) or None."""
    if not values:
        actual, expected = (_tree_map(lambda t: (tuple(t.shape), t.dtype), r) for r in (actual, expected))
        if actual != expected:
            raise AssertionError(f"dtype/shape mismatch: {actual} vs {expected}")
        return
    atol, rtol = tol if tol else (None, None)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True,
                               check_dtype=True)


def reason_of(exc):
    """First line of an exception, plus the mismatch count and greatest difference for
    assert_close failures."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    text += "".join(f"; {ln}" for ln in lines[1:] if ln.startswith(("Mismatched", "Greatest absolute")))
    return f"{type(exc).__name__}: {text}"[:300]


def run_case(op, variant, sample, dtype, ref, seed, on_host=frozenset()):
    """One case: CPU oracle, then tpu. Returns (status, reason, fallback op names, cpu result),
    or None when the variant does not apply."""
    import torch_pjrt
    try:
        torch.manual_seed(seed)
        expected = call_variant(op, variant, Inputs(sample, "cpu", variant, ref), seed)
    except NotApplicable:
        return None
    except Exception as e:
        return "cpu-invalid", reason_of(e), [], None
    fallbacks = []
    try:
        x = Inputs(sample, "tpu", variant, ref, on_host)
        torch.manual_seed(seed)
        torch_pjrt.reset_stats()
        actual = to_host(call_variant(op, variant, x, seed))
        fallbacks = sorted(torch_pjrt.stats()["fallbacks"])
        compare(actual, _tree_map(torch.Tensor.detach, expected), tolerance(op, dtype), values_comparable(op))
    except Exception as e:
        fallbacks = fallbacks or sorted(torch_pjrt.stats()["fallbacks"])
        cause = known_cause(op_name(op), str(dtype).replace("torch.", ""), variant)
        if cause and isinstance(e, AssertionError):
            return "fail", f"known: {cause}; {reason_of(e)}"[:400], fallbacks, expected
        return "fail", reason_of(e), fallbacks, expected
    note = "" if values_comparable(op) else SHAPES_ONLY
    return ("fallback" if fallbacks else "native"), note, fallbacks, expected


def case_id(name, dtype, index, variant):
    return f"{name}|{dtype}|{index}|{variant}"


# ----------------------------------------------------------------------------- the child process

def worker():
    """Child process: reads a job {ops, dtypes, samples, skip} as JSON on stdin and writes JSON
    lines on its (private) stdout: {"ready"}, {"start": id} before each case, {"record": ...}
    after it, {"done": op} after each op. Anything else printed goes to stderr."""
    import warnings
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (Python or C) must not corrupt the protocol
    warnings.simplefilter("ignore")
    job = json.load(sys.stdin)
    skip = set(job["skip"])
    by_name = {op_name(op): op for op in load_op_db()}

    def emit(**msg):
        proto.write(json.dumps(msg) + "\n")

    emit(ready=True)
    for name in job["ops"]:
        op = by_name[name]
        supported = op.supported_dtypes("cpu")
        for dtype_name in job["dtypes"]:
            dtype = getattr(torch, dtype_name)
            if dtype not in supported:
                continue
            torch.manual_seed(0)
            try:
                samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False),
                                                job["samples"]))
            except Exception as e:
                emit(record=dict(op=name, variant="*", dtype=dtype_name, sample=-1,
                                 status="cpu-invalid", reason="sample_inputs: " + reason_of(e), fallbacks=[]))
                continue
            on_host = host_tensors(op, dtype, len(samples))
            for index, sample in enumerate(samples):
                ref = None
                for variant in VARIANTS:
                    cid = case_id(name, dtype_name, index, variant)
                    if cid in skip or not variant_applies(op, variant, dtype):
                        continue
                    if variant != "function" and ref is None:
                        break  # the plain call is invalid on CPU (or crashed): nothing else to try
                    emit(start=cid)
                    outcome = run_case(op, variant, sample, dtype, ref, zlib.crc32(cid.encode()),
                                       on_host[index])
                    if outcome is None:
                        continue
                    status, reason, fallbacks, expected = outcome
                    if variant == "function":
                        ref = expected
                    emit(record=dict(op=name, variant=variant, dtype=dtype_name, sample=index,
                                     status=status, reason=reason, fallbacks=fallbacks))
        emit(done=name)


# ----------------------------------------------------------------------------- the driver

def _read_lines(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def _run_child(remaining, dtypes, samples, skip, timeout, on_record, on_op_done):
    """One child process over the `remaining` op names (removed as they finish). Returns None when
    it got through them all, else (id of the case it was running or None, "crash ..."/"timeout")."""
    child = subprocess.Popen([sys.executable, "-m", "torch_pjrt.compat", "worker"],
                             env=dict(os.environ, TORCH_PJRT_QUIET_FALLBACK="1"), text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    child.stdin.write(json.dumps(dict(ops=remaining, dtypes=dtypes, samples=samples, skip=skip)))
    child.stdin.close()
    lines = queue.Queue()
    threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
    current, ready, wait = None, False, timeout + 120  # the first message waits for imports too
    while True:
        try:
            line = lines.get(timeout=wait)
        except queue.Empty:
            child.kill()
            child.wait()
            return current, f"timeout (> {timeout:g} s)"
        if line is None:  # the child exited
            code = child.wait()
            if not remaining:
                return None
            if not ready:
                raise RuntimeError(f"the compat worker exited ({code}) before it was ready; "
                                   "run `python -m torch_pjrt.compat worker` to see why")
            return current, (f"crash (signal {-code})" if code < 0 else f"crash (exit {code})")
        msg = json.loads(line) if line.startswith("{") else {}
        wait = timeout
        ready = ready or "ready" in msg
        if "start" in msg:
            current = msg["start"]
        elif "record" in msg:
            on_record(msg["record"])
            current = None
        elif "done" in msg:
            remaining.remove(msg["done"])
            on_op_done(msg["done"])
            current = None


def drive(ops, dtypes, samples, timeout, on_record, on_op_done):
    """Runs `ops` (names) in child processes. The case a child crashed or timed out on is recorded
    as a failure and skipped by the next child; an op that does it too often (or outside a case)
    is abandoned."""
    remaining, skip, crashes = list(ops), [], collections.Counter()
    while remaining:
        lost = _run_child(remaining, dtypes, samples, skip, timeout, on_record, on_op_done)
        if lost is None:
            break
        current, why = lost
        name, dtype, index, variant = (current or case_id(remaining[0], "*", -1, "*")).split("|")
        on_record(dict(op=name, variant=variant, dtype=dtype, sample=int(index),
                       status="fail", reason=why, fallbacks=[]))
        crashes[name] += 1
        if current is None or crashes[name] >= MAX_CRASHES_PER_OP:
            remaining.remove(name)
            on_op_done(name)
        else:
            skip.append(current)


def sweep(ops, dtypes, samples, timeout, jobs):
    """Runs every op over `jobs` parallel drivers; returns the records in op, dtype, sample,
    variant order. Prints one progress line per op to stderr."""
    records, lock, started, done = [], threading.Lock(), time.time(), [0]

    def on_record(rec):
        with lock:
            records.append(rec)

    def on_op_done(name):
        with lock:
            done[0] += 1
            mine = [r for r in records if r["op"] == name]
            counts = collections.Counter(r["status"] for r in mine)
            print(f"[{done[0]}/{len(ops)} {time.time() - started:6.1f}s] {name}: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), file=sys.stderr, flush=True)

    groups = [ops[i::jobs] for i in range(jobs)]
    threads = [threading.Thread(target=drive, args=(g, dtypes, samples, timeout, on_record, on_op_done))
               for g in groups if g]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    order = {name: i for i, name in enumerate(ops)}
    rank = {name: i for i, name in enumerate(DTYPES + VARIANTS)}
    records.sort(key=lambda r: (order[r["op"]], rank.get(r["dtype"], -1), r["sample"],
                                rank.get(r["variant"], -1)))
    return records


# ----------------------------------------------------------------------------- reports

def metadata(command, dtypes, samples):
    """How a sweep was made: command, torch version, plugin platform, native op table."""
    import torch_pjrt
    return dict(command=command, torch=torch.__version__, platform=torch_pjrt.plugin_info()["platform"],
                dtypes=dtypes, samples=samples, native_ops=torch_pjrt.native_ops(),
                date=time.strftime("%Y-%m-%d"))


def cell(records):
    """One op x dtype summary: 'native n/n', 'fallback k/n: a, b', 'fail k/n: reason' or '-'."""
    counted = [r for r in records if r["status"] in COUNTED]
    if not counted:
        return "-"
    fails = [r for r in counted if r["status"] == "fail"]
    if fails:
        return f"fail {len(fails)}/{len(counted)}: {fails[0]['reason'][:80]}"
    fell_back = [r for r in counted if r["status"] == "fallback"]
    if fell_back:
        names = sorted({f for r in fell_back for f in r["fallbacks"]})
        return f"fallback {len(fell_back)}/{len(counted)}: " + ", ".join(names)
    return f"native {len(counted)}/{len(counted)}"


def _md(text):
    return text.replace("|", "\\|").replace("\n", " ")


def render(meta, records):
    """COMPAT.md text: generation, per-dtype summary, per-op table, failures, native op table."""
    dtypes = [d for d in meta["dtypes"] if any(r["dtype"] == d for r in records)]
    ops = sorted({r["op"] for r in records})
    by = collections.defaultdict(list)
    for r in records:
        by[r["op"], r["dtype"]].append(r)
    out = ["# Op compatibility of the tpu device", "",
           "Generated by `" + meta["command"] + "` with torch " + meta["torch"]
           + ", PJRT plugin platform `" + meta["platform"] + "`, on " + meta["date"] + ".",
           f"Each OpInfo of PyTorch's `op_db`, each supported dtype, up to {meta['samples']} sample inputs, "
           "variants " + ", ".join(VARIANTS) + ", compared with the CPU result. **native**: passed with "
           "no CPU fallback; **fallback**: passed, but some op ran on CPU; **fail**: mismatch, "
           "error, crash or timeout. Cases whose CPU call raises are not counted. For ops marked "
           "(shapes only) the OpInfo declares the output random or uninitialized: only dtypes and "
           "shapes are compared.", "",
           "## Summary", "", "| dtype | cases | native | fallback | fail |", "| --- | ---: | ---: | ---: | ---: |"]
    for d in dtypes + ["all"]:
        counts = collections.Counter(r["status"] for r in records if d in ("all", r["dtype"]))
        n = sum(counts[s] for s in COUNTED)
        pct = [f"{100 * counts[s] / n:.1f}%" if n else "-" for s in COUNTED]
        out.append(f"| {d} | {n} | " + " | ".join(pct) + " |")
    out += ["", "## Per op", "", "| op | " + " | ".join(dtypes) + " |", "| --- |" + " --- |" * len(dtypes)]
    for op in ops:
        mark = " (shapes only)" if any(r["reason"] == SHAPES_ONLY for d in dtypes for r in by[op, d]) else ""
        out.append(f"| {op}{mark} | " + " | ".join(_md(cell(by[op, d])) for d in dtypes) + " |")
    out += ["", "## Failures", ""]
    failures = collections.defaultdict(list)
    for r in records:
        if r["status"] == "fail":
            failures[r["op"], r["reason"]].append(f"{r['dtype']} {r['variant']}")
    for (op, reason), where in failures.items():
        shown = ", ".join(dict.fromkeys(where))
        out.append(f"- `{op}` ({shown}): {_md(reason)}")
    if not failures:
        out.append("None.")
    out += ["", "## Native op table", "",
            f"`torch_pjrt.native_ops()`, from the C op table ({len(meta['native_ops'])} entries):", ""]
    out += [", ".join(f"`{n}`" for n in meta["native_ops"]), ""]
    return "\n".join(out)


def write_json(path, meta, records):
    """Writes {meta..., "cases": [...]} with one case per line, so diffs stay readable."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    head = json.dumps(meta)[:-1]
    with open(path, "w") as f:
        f.write(head + ', "cases": [\n' + ",\n".join(json.dumps(r) for r in records) + "\n]}\n")


def write_report(meta, records, out_dir, md_path):
    """Writes out_dir/ops.json and the markdown report."""
    write_json(os.path.join(out_dir, "ops.json"), meta, records)
    write_markdown(out_dir, md_path)
    print(f"wrote {os.path.join(out_dir, 'ops.json')} and {md_path}", file=sys.stderr)


def write_markdown(out_dir, md_path):
    """COMPAT.md from out_dir/ops.json and out_dir/models.json, whichever exist."""
    from torch_pjrt.compat_models import render_models
    parts = []
    for name in ("ops.json", "models.json"):
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                doc = json.load(f)
            if name == "ops.json":
                parts.append(render({k: v for k, v in doc.items() if k != "cases"}, doc["cases"]))
            else:
                parts.append(render_models(doc))
    if parts and not os.path.exists(os.path.join(out_dir, "ops.json")):
        parts.insert(0, "# Compatibility of the tpu device\n")
    with open(md_path, "w") as f:
        f.write("\n".join(parts))


def merge(out_dir, md_path):
    """Combines out_dir/ops.shard-*-of-*.json into ops.json and the markdown report."""
    paths = sorted(glob.glob(os.path.join(out_dir, "ops.shard-*-of-*.json")))
    if not paths:
        raise SystemExit(f"no shard files in {out_dir}")
    shards = []
    for p in paths:
        with open(p) as f:
            shards.append(json.load(f))
    meta = {k: v for k, v in shards[0].items() if k != "cases"}
    meta["command"] = meta["command"].split(" --shard")[0] + " --shard i/n (merged)"
    records = sorted((r for s in shards for r in s["cases"]), key=lambda r: r["op"])  # stable
    write_report(meta, records, out_dir, md_path)


# ----------------------------------------------------------------------------- command line

def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_pjrt.compat", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    ops_p = sub.add_parser("ops", help="sweep the OpInfo database")
    ops_p.add_argument("--quick", action="store_true", help=f"{len(QUICK_OPS)} common ops, {QUICK_SAMPLES} samples")
    ops_p.add_argument("--shard", default="0/1", help="i/n: every n-th op from the i-th (0-based)")
    ops_p.add_argument("--ops", help="comma-separated op names (full 'name.variant' or base name)")
    ops_p.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated, from " + ",".join(DTYPES))
    ops_p.add_argument("--samples", type=int, help=f"samples per op and dtype (default {DEFAULT_SAMPLES})")
    ops_p.add_argument("--timeout", type=float, default=60, help="seconds one case may take")
    ops_p.add_argument("--jobs", type=int, default=1, help="child processes in parallel")
    for p in (ops_p, sub.add_parser("merge", help="combine per-shard JSON into ops.json + COMPAT.md")):
        p.add_argument("--out", default=os.path.join(ROOT, "compat"), help="directory for the JSON")
        p.add_argument("--md", default=os.path.join(ROOT, "COMPAT.md"), help="markdown report path")
    models_p = sub.add_parser("models", help="run whole models (Transformers, torchvision, timm)")
    models_p.add_argument("--suites", default="transformers,torchvision,timm", help="comma-separated suites")
    models_p.add_argument("--only", help="comma-separated model names (`name` or `suite/name`)")
    models_p.add_argument("--limit", help="at most N models per suite: N, or suite=N,... ('*' for the rest)")
    models_p.add_argument("--timeout", type=float, default=180, help="seconds one model may take")
    models_p.add_argument("--jobs", type=int, default=1, help="worker processes in parallel")
    models_p.add_argument("--shuffle", action="store_true", help="run in a fixed mixed order (a cut-short run is a sample)")
    models_p.add_argument("--time-limit", type=float, help="seconds: start no model after this")
    models_p.add_argument("--resume", action="store_true",
                          help="keep the results in DIR/models.progress.jsonl; run the rest and the cpu-invalid (or only --only)")
    models_p.add_argument("--out", default=os.path.join(ROOT, "compat"), help="directory for models.json")
    models_p.add_argument("--md", default=os.path.join(ROOT, "COMPAT.md"), help="markdown report path")
    sub.add_parser("worker", help=argparse.SUPPRESS)
    sub.add_parser("models-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.cmd == "worker":
        return worker()
    if args.cmd == "merge":
        return merge(args.out, args.md)
    if args.cmd in ("models", "models-worker"):
        from torch_pjrt import compat_models
        if args.cmd == "models-worker":
            return compat_models.worker()
        command = "python -m torch_pjrt.compat " + " ".join(sys.argv[1:] if argv is None else argv)
        only = set(args.only.split(",")) if args.only else None
        limit = None
        if args.limit:
            limit = ({k: int(v) for k, v in (item.split("=") for item in args.limit.split(","))}
                     if "=" in args.limit else int(args.limit))
        os.makedirs(args.out, exist_ok=True)
        doc = compat_models.run(args.suites.split(","), only, limit, args.jobs, args.timeout, command,
                                os.path.join(args.out, "models.progress.jsonl"), args.shuffle,
                                args.resume, args.time_limit)
        path = compat_models.write(doc, args.out)
        write_markdown(args.out, args.md)
        print(f"wrote {path} and {args.md}", file=sys.stderr)
        return

    dtypes = args.dtypes.split(",")
    unknown = set(dtypes) - set(DTYPES)
    if unknown:
        parser.error(f"unknown dtypes {sorted(unknown)}")
    i, n = (int(v) for v in args.shard.split("/"))
    names = args.ops.split(",") if args.ops else None
    ops = [op_name(op) for op in select_ops(load_op_db(), names, args.quick, (i, n))]
    if names and not ops:
        parser.error(f"no OpInfo named {names}")
    samples = args.samples or (QUICK_SAMPLES if args.quick else DEFAULT_SAMPLES)
    started = time.time()
    records = sweep(ops, dtypes, samples, args.timeout, args.jobs)
    command = "python -m torch_pjrt.compat " + " ".join(sys.argv[1:] if argv is None else argv)
    meta = metadata(command, dtypes, samples)
    print(f"{len(ops)} ops, {len(records)} cases in {time.time() - started:.0f} s", file=sys.stderr)
    if n > 1:
        path = os.path.join(args.out, f"ops.shard-{i}-of-{n}.json")
        write_json(path, meta, records)
        print(f"wrote {path}; combine the shards with `python -m torch_pjrt.compat merge`", file=sys.stderr)
    else:
        write_report(meta, records, args.out, args.md)


if __name__ == "__main__":
    main()
