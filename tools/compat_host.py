"""Host-read sweep: every registered ATen op called on tpu inputs, looking for kernels that crash.

    python tools/compat_host.py [--ops NAME,...] [--jobs N] [--timeout S] [--out DIR] [--md PATH]

A tpu tensor's data pointer is a never-mapped address (by design: a stray host read fails loudly),
so an ATen kernel that reads tensor memory on the host while running for a tpu tensor kills the
process. The dispatcher sends a tpu call to our table kernel or our CPU fallback, which are
safe, or, for an op with neither, to PyTorch's own composite kernels; a composite that reads
`data_ptr()` itself (`_saturate_weight_to_fp16`, `_grid_sampler_2d_cpu_fallback`) crashes.
This sweep calls every op in the dispatcher's registry, with arguments made from its schema
(several profiles: small float tensors, 4-d ones, integer ones, optional tensors given), in child
processes, so a crash costs one op and names it. What an op returns or raises is not checked:
only that the process survives. The ops it finds are routed to the CPU fallback in the glue
(csrc/torch/fallback.cpp, kCompositesOnCpu); the result goes to DIR/host_reads.json and COMPAT.md.
"""
import argparse
import json
import os
import sys
import threading
import time

import _child
from _child import ROOT

# Ops whose call would stall or tear down the process on any device, not read device memory.
SKIP = {
    "aten::_sleep",           # sleeps
    "aten::_async_error",     # raises asynchronously by design
}


def all_ops():
    """Every ATen op overload in the dispatcher's registry, sorted."""
    import torch
    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))


def overload(name):
    import torch
    base, _, ov = name[len("aten::"):].partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


class Unsupported(Exception):
    """An argument type the sweep cannot make (a storage, a stream, a custom class)."""


# Argument profiles: the shape of the first tensor argument, of the others, their dtype, and
# whether optional arguments are given. Most are tried on CPU first: a call PyTorch's CPU kernel
# accepts reaches the body of the op's kernel, where a host read would be, and is then made on
# tpu with the same values.
_SHAPES = [(2, 3), (2, 3, 4, 4), (3,), (2, 3, 4), (), (4, 4)]
_PAIRS = [((2, 3, 4, 4), (2, 4, 4, 2)), ((2, 3, 4, 4), (3,)), ((2, 3, 4, 4), (4, 3, 3, 3)),
          ((2, 3, 4), (3,)), ((2, 3), (3,)), ((4, 4), (4,))]
PROFILES = ([(s, s, "float32", opt) for s in _SHAPES for opt in (False, True)]
            + [(s, s, "int64", opt) for s in _SHAPES[:4] for opt in (False, True)]
            + [(a, b, "float32", opt) for a, b in _PAIRS for opt in (False, True)])
TPU_CALLS_PER_OP = 3   # CPU-valid profiles replayed on tpu
BLIND_CALLS_PER_OP = 4  # profiles tried on tpu directly when none is valid on CPU (or no CPU kernel)


def _ints_for(name):
    if name in ("size", "sizes", "shape", "output_size"):
        return [2, 3]
    if name in ("padding", "output_padding"):
        return [0, 0]
    if name == "kernel_size":
        return [2, 2]
    if name in ("stride", "dilation"):
        return [1, 1]
    if name in ("dim", "dims"):
        return [0]
    return [1]


def make_call(op, profile, device, seed=0):
    """(args, kwargs) for one call of OpOverload |op| under |profile| on |device|; the same
    values for every device."""
    import torch
    first, rest, dtype, optionals = profile
    g = torch.Generator().manual_seed(seed)
    made = [0]

    def tensor():
        shape = first if made[0] == 0 else rest
        made[0] += 1
        t = (torch.randint(0, 2, shape, generator=g) if dtype == "int64"
             else torch.randn(shape, generator=g))
        return t.to(device)

    args, kwargs = [], {}
    for a in op._schema.arguments:
        t, real, name = str(a.type), str(a.real_type), a.name
        optional = t.startswith("Optional[")
        inner = t[len("Optional["):-1] if optional else t
        if optional and not optionals:
            v = None
        elif "ScalarType" in real:
            v = getattr(torch, dtype)
        elif "Layout" in real:
            v = torch.strided
        elif "MemoryFormat" in real:
            v = torch.contiguous_format
        elif inner == "Tensor":
            v = tensor()
        elif inner in ("List[Tensor]", "List[Optional[Tensor]]"):
            v = [tensor(), tensor()]
        elif inner == "int":
            v = -1 if name == "end_dim" else 0 if name in ("dim", "dim0", "axis", "start_dim") else 1
        elif inner == "List[int]":
            v = _ints_for(name)
        elif inner == "bool":
            v = False
        elif inner == "List[bool]":
            v = [True, True, True]
        elif inner == "float":
            v = 0.5
        elif inner == "List[float]":
            v = [0.5, 0.5]
        elif inner == "number":
            v = 1 if dtype == "int64" else 0.5
        elif inner == "List[number]":
            v = [1.0, 1.0]
        elif inner == "str":
            v = {"reduce": "sum", "reduction": "mean", "approximate": "none",
                 "rounding_mode": "floor", "padding_mode": "zeros", "mode": "bilinear",
                 "side": "left", "indexing": "ij", "interpolation": "linear"}.get(name, "none")
        elif inner == "Device":
            v = torch.device(device)
        elif inner == "Generator":
            v = None
        else:
            raise Unsupported(f"argument '{name}' of type {real}")
        if a.kwarg_only:
            kwargs[name] = v
        else:
            args.append(v)
    return args, kwargs


def worker():
    """Child: reads {"ops": [...]} on stdin; for each op prints {"start": op, "device": d} before
    each call and {"record": {...}} once the op is done, on its private stdout."""
    import warnings
    emit = _child.protocol()
    warnings.simplefilter("ignore")
    import torch
    import torch_pjrt  # noqa: F401

    def call(op, profile, device):
        emit(start=op_name, device=device)
        args, kwargs = make_call(op, profile, device)
        out = op(*args, **kwargs)
        # A device result is read back, so the program the call enqueued runs before the next.
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor) and t.device.type == "tpu" and t.layout == torch.strided:
                t.cpu()

    job = json.load(sys.stdin)
    emit(ready=True)
    for op_name in job["ops"]:
        rec = {"op": op_name, "cpu_valid": 0, "tpu_ok": 0, "tpu_calls": 0}
        try:
            op = overload(op_name)
        except Exception as e:
            emit(record=dict(rec, status="unresolved", reason=_child.reason_of(e, 200)))
            continue
        has_cpu = torch._C._dispatch_has_computed_kernel_for_dispatch_key(op_name, "CPU")
        replay, reason = [], ""
        try:
            for profile in PROFILES if has_cpu and not job.get("blind") else ():
                if len(replay) == TPU_CALLS_PER_OP:
                    break
                try:
                    call(op, profile, "cpu")
                    replay.append(profile)
                except Unsupported:
                    raise
                except Exception:
                    pass
            rec["cpu_valid"] = len(replay)
            for profile in replay or (PROFILES if job.get("blind") else PROFILES[:BLIND_CALLS_PER_OP]):
                rec["tpu_calls"] += 1
                try:
                    call(op, profile, "tpu")
                    rec["tpu_ok"] += 1
                except Unsupported:
                    raise
                except Exception as e:
                    reason = reason or _child.reason_of(e, 200)
        except Unsupported as e:
            emit(record=dict(rec, status="unsupported", reason=str(e)))
            continue
        emit(record=dict(rec, status="ok" if rec["tpu_ok"] else "error", reason=reason))
    emit(done=True)


def _run_child(ops, timeout, on_record, blind=False):
    """One child over |ops|; returns None when it finished them all, else (index of the op it
    was on, the device of the call that stopped it, why: "crash (signal N)" or "timeout")."""
    child = _child.Child("compat_host.py", "worker", job={"ops": ops, "blind": blind})
    current, device = None, None
    for msg in child.messages(timeout, first=timeout + 120):  # the first waits for imports too
        if "start" in msg:
            current, device = ops.index(msg["start"]), msg["device"]
        elif "record" in msg:
            on_record(msg["record"])
        elif "done" in msg:
            child.wait()
            return None
    return current, device, child.lost(timeout)


def sweep(ops, jobs=1, timeout=60):
    """Runs |ops| in child processes; returns the records in op order. A call that kills the
    child is a "crash" when it ran on tpu, and "crash on cpu too" when PyTorch's CPU kernel
    itself died on the same arguments (a kernel without input checks, not a device read)."""
    records, lock = {}, threading.Lock()
    started = time.time()

    def drive(group):
        rest = list(group)
        while rest:
            lost = _run_child(rest, timeout, lambda r: records.__setitem__(r["op"], r))
            if lost is None:
                break
            index, device, why = lost
            if index is None:  # died before its first op: a broken setup, not an op's fault
                raise RuntimeError("the host-read sweep worker exited before its first op: " + why)
            status = "crash" if device == "tpu" else "crash on cpu too"
            if device == "cpu":
                # PyTorch's CPU kernel died on a profile: every profile on tpu alone, so that the
                # record still says whether the tpu path survives them.
                blind = {}
                if _run_child([rest[index]], timeout, lambda r: blind.update(r), blind=True):
                    status = "crash on cpu and tpu"
            with lock:
                records[rest[index]] = {"op": rest[index], "status": status, "reason": why}
                print(f"[{time.time() - started:6.0f}s] {rest[index]}: {status}: {why}",
                      file=sys.stderr, flush=True)
            rest = rest[index + 1:]

    _child.in_parallel(drive, ops, jobs)
    return [records[n] for n in ops if n in records]


def render(doc):
    """COMPAT.md's section for this sweep."""
    recs = doc["ops"]
    crashes = [r for r in recs if r["status"] == "crash"]
    cpu_too = [r for r in recs if r["status"] in ("crash on cpu too", "crash on cpu and tpu")]
    out = ["## Ops whose kernels read device memory on the host", "",
           f"Generated by `{doc['command']}` on {doc['date']}: every ATen op in the dispatcher's "
           f"registry ({len(recs)} overloads) called on tpu tensors, in child processes, with "
           "arguments made from its schema (profiles of shapes and dtypes tried on CPU first, so "
           "that the tpu call reaches the kernel's body); only whether the process survives is "
           "checked. Ops whose kernel crashed on tpu alone are routed to the CPU fallback "
           "(`torch_pjrt.host_read_ops()`).", "",
           f"- called: {len(recs)}; returned on tpu for some profile: "
           f"{sum(r['status'] == 'ok' for r in recs)}; raised for every profile: "
           f"{sum(r['status'] == 'error' for r in recs)}; crashed on tpu alone: {len(crashes)}; "
           f"crashed on CPU with the same arguments: {len(cpu_too)}", ""]
    routed = doc.get("routed", [])
    if routed:
        out.append("Routed to the CPU fallback because their PyTorch kernel reads device memory: "
                   + ", ".join(f"`{n}`" for n in routed) + ".")
        out.append("")
    if crashes:
        out += ["Crashing now:", ""] + [f"- `{r['op']}`: {r['reason']}" for r in crashes]
    else:
        out.append("No op crashes on tpu that does not crash on CPU.")
    if cpu_too:
        out += ["", "Crashing on CPU as well, with these arguments (PyTorch kernels that do not check "
                "their inputs; not device reads): " + ", ".join(f"`{r['op']}`" for r in cpu_too) + "."]
    out.append("")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python tools/compat_host.py", description=__doc__.split("\n")[0])
    parser.add_argument("cmd", nargs="?", default="sweep", choices=["sweep", "worker"])
    parser.add_argument("--ops", help="comma-separated aten::name.overload (default: all)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60, help="seconds one op may take")
    parser.add_argument("--out", default=os.path.join(ROOT, "compat"))
    parser.add_argument("--md", default=os.path.join(ROOT, "COMPAT.md"),
                        help="markdown report to rewrite ('' to leave it alone)")
    args = parser.parse_args(argv)
    if args.cmd == "worker":
        return worker()
    import torch
    import torch_pjrt
    ops = args.ops.split(",") if args.ops else [n for n in all_ops() if n not in SKIP]
    started = time.time()
    recs = sweep(ops, args.jobs, args.timeout)
    doc = {"command": "python tools/compat_host.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "seconds": round(time.time() - started),
           "routed": getattr(torch_pjrt, "host_read_ops", list)(), "ops": recs}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "host_reads.json")
    with open(path, "w") as f:
        f.write(json.dumps({k: v for k, v in doc.items() if k != "ops"})[:-1] + ', "ops": [\n'
                + ",\n".join(json.dumps(r) for r in recs) + "\n]}\n")
    if args.md:
        from compat import write_markdown
        write_markdown(args.out, args.md)
    bad = [r for r in recs if r["status"] == "crash"]
    print(f"{len(recs)} ops in {doc['seconds']} s; {len(bad)} crashed on tpu only; wrote {path}", file=sys.stderr)
    for r in bad:
        print(f"  {r['op']}: {r['reason']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
