"""PyTorch's OpInfo database through DTensor on a tpu device mesh, ranks as threads of one process
(python dtensor_ops.py --threads N; N CPU-plugin devices) or as processes (RANK, WORLD_SIZE...
set): each float32 op's first sample, its tensors distributed by PyTorch's own DTensorConverter
(the sharding combinations its DTensor op tests use, up to MAX_COMBOS), the op run on the
DTensors, forward and backward, and full_tensor() compared with the op on CPU tensors (or, where
the two float32 results differ, with the op in float64: see _same). The same
cases run on a CPU mesh with gloo in the same process, so a case DTensor itself gets wrong (no
sharding strategy, a random op's draws) is told apart from one the tpu gets wrong. Prints
{case: [tpu outcome, cpu outcome]}, "ok" or the error.

Each rank works on its own copies of the samples: rank threads sharing a leaf tensor that is a
view deadlock in PyTorch 2.15's autograd, CPU tensors alone (its grad_accumulator holds the
tensor's autograd mutex while it takes the GIL; Tensor.is_leaf holds the GIL while it takes that
mutex). That was this sweep's occasional hang."""
import json
import os
import sys

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.distributed._tensor.common_dtensor import DTensorConverter
from torch.utils._pytree import tree_flatten, tree_map

import torch_pjrt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools"))
import compat  # noqa: E402 - values_comparable: the OpInfo's own word on random outputs

MAX_COMBOS = 4


def _tensors(tree, grad=False):
    return [t for t in tree_flatten(tree)[0]
            if isinstance(t, torch.Tensor) and (t.requires_grad or not grad)]


def _own(tree):
    """Fresh leaf copies of the tensors in |tree|: a rank's own (see the module's note)."""
    return tree_map(lambda t: t.detach().clone().requires_grad_(t.requires_grad)
                    if isinstance(t, torch.Tensor) else t, tree)


def _call(op, args, kwargs, kind):
    """The op's outputs, or for kind "grad" the gradients of the sum of its outputs with respect
    to its inputs that require them."""
    out = op.op(*args, **kwargs)
    if kind != "grad":
        return out
    loss = sum(o.sum() for o in _tensors(out, grad=True))
    return list(torch.autograd.grad(loss, _tensors((args, kwargs), grad=True), allow_unused=True))


def _cases():
    """(name, op, args, kwargs, reference, kind) for each op: kind "values" (compared), "shapes"
    (the OpInfo declares the output random or uninitialized: shapes and dtypes only) and, for ops
    with autograd and comparable values, "grad" (the backward). Drawn once, on this thread (the
    global generator is the process's: samples drawn on each rank's thread would differ between
    ranks); each rank runs copies of its own."""
    cases = []
    for op in op_db:
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        name = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        values = compat.values_comparable(op)
        for kind in ("values" if values else "shapes", "grad"):
            if kind == "grad" and not (values and op.supports_autograd):
                continue
            torch.manual_seed(0)
            try:
                s = next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=kind == "grad")))
                args = (s.input, *s.args)
                ref = _call(op, _own(args), s.kwargs, kind)
            except Exception:  # noqa: BLE001 - no CPU reference: not a case
                continue
            try:
                ref64 = _call(op, _own(_f64(args)), _f64(s.kwargs), kind)
            except Exception:  # noqa: BLE001 - no float64 arbiter: CPU's word alone
                ref64 = None
            cases.append((name + ("/grad" if kind == "grad" else ""), op, args, s.kwargs,
                          (ref, ref64), kind))
    return cases


def _f64(tree):
    return tree_map(lambda t: t.detach().double().requires_grad_(t.requires_grad)
                    if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, tree)


def _nearer(got, ref, ref64):
    """Whether each of |got|'s tensors lies no farther from the float64 result than CPU's
    float32 one does (finite values only)."""
    got, ref, ref64 = _tensors(got), _tensors(ref), _tensors(ref64)
    if not (len(got) == len(ref) == len(ref64)):
        return False
    for g, r, e in zip(got, ref, ref64):
        g, r, e = (t.detach().cpu().double() for t in (g, r, e))
        if g.shape != e.shape or not (g.isfinite().all() and e.isfinite().all()):
            return False
        if (g - e).abs().max() > (r - e).abs().max():
            return False
    return True


def _same(got, refs, kind):
    """CPU's float32 result is the oracle, to 1e-4; a result outside that which is no farther
    from the float64 result than CPU's own passes too (two float32 approximations each within
    rounding of the truth: matrix_exp's gradient on CPU's AVX-512 kernels is 8.6e-5 from it, the
    tpu's 4.5e-5, on opposite sides)."""
    ref, ref64 = refs
    if kind != "shapes":
        try:
            torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4, equal_nan=True,
                                       check_device=False)
        except AssertionError:
            if ref64 is None or not _nearer(got, ref, ref64):
                raise
        return
    assert [(t.shape, t.dtype) for t in _tensors(got)] == [(t.shape, t.dtype) for t in _tensors(ref)], \
        "shapes or dtypes differ"


def run(rank, world, device, cases):
    mesh = init_device_mesh(device, (world,))
    out = {}
    for name, op, args, kwargs, ref, kind in cases:
        args, kwargs, ref = _own((args, kwargs, ref))
        for i, (d_args, d_kwargs) in enumerate(DTensorConverter(mesh, args, kwargs)):
            if i >= MAX_COMBOS:
                break
            try:
                got = tree_map(lambda t: t.full_tensor().cpu() if isinstance(t, DTensor) else t,
                               _call(op, d_args, d_kwargs, kind))
                _same(got, ref, kind)
                out[f"{name}/{i}"] = "ok"
            except Exception as e:  # noqa: BLE001 - every rank takes the same path: recorded
                out[f"{name}/{i}"] = f"{type(e).__name__}: {str(e)[:300]}"
    return out


if __name__ == "__main__":
    cases = _cases()
    if sys.argv[1:2] == ["--threads"]:
        n = int(sys.argv[2])
        tpu = torch_pjrt.distributed.run_threads(run, n, args=(n, "tpu", cases))[0]
        cpu = torch_pjrt.distributed.run_threads(run, n, args=(n, "cpu", cases), backend="gloo")[0]
    else:  # one rank of a process launch (RANK, WORLD_SIZE, MASTER_ADDR/PORT set)
        import torch.distributed as dist
        rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("cpu:gloo,tpu:pjrt", init_method="env://", rank=rank, world_size=n)
        tpu, cpu = run(rank, n, "tpu", cases), run(rank, n, "cpu", cases)
        dist.destroy_process_group()
    print(json.dumps({k: [tpu[k], cpu.get(k, "missing")] for k in tpu}))
