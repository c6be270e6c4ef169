"""Differential fuzzing of the tpu device against PyTorch's CPU backend (tools/fuzz.py).

test_fuzz_short_pass runs a short seeded pass (random ATen programs, each run on CPU and on tpu
in a child process, every tensor compared) and fails on any crash, hang or mismatch that is not
one of the known backend bugs below. Each known bug is pinned by a strict xfail test holding its
minimised reproducer: once a bug is fixed its test XPASSes (and fails), so its entry here goes.
Longer passes: `make fuzz` or `python tools/fuzz.py --seed S --programs N --time-limit SEC`.
"""
import re

import pytest

import fuzz


class Bug:
    def __init__(self, name, why, steps, match):
        self.name, self.why, self.steps, self.match = name, why, steps, match


def _stmt(f):
    return f.get("statement") or ""


# Known backend bugs (found by the fuzzer; reproducers minimised by it). |match| recognises a
# finding of the short pass as one of them.
KNOWN = [
    Bug("clamp_unsigned_negative_bound",
        "clamp of a uint8 tensor with a negative scalar bound wraps the bound into uint8 "
        "(min=-2 becomes 254), so clamp(x, min=-2) returns 254 everywhere; CPU leaves x as is",
        ["v0 = make((3,), torch.uint8, 43114).to(dev)",
         "v1 = torch.clamp(v0, min=-2)"],
        lambda f: "clamp" in _stmt(f) and (
            (f["kind"] == "value" and "torch.uint8" in f["detail"])
            or (f["kind"] == "missing_error" and "outside the representable range" in f["detail"]))),
    Bug("fill_expanded_rejected",
        "zero_()/fill_() on an expanded (stride 0) tensor raises 'more than one element of the "
        "written-to tensor refers to a single memory location'; CPU allows it (every element "
        "gets the same value)",
        ["v0 = make((), torch.int64, 753167).to(dev)",
         "v1 = v0.expand([3, 3, 1, 5])",
         "v1.zero_()"],
        lambda f: f["kind"] == "unexpected_error" and "written-to tensor" in f["detail"]
        and re.search(r"\.(zero_|fill_)\(", _stmt(f))),
    Bug("copy_overlap_unchecked",
        "Tensor.copy_ between tpu tensors skips PyTorch's overlap checks: copying into an "
        "expanded tensor, or from a partially overlapping view, silently writes; CPU raises "
        "'unsupported operation: ... refer to a single memory location'",
        ["v0 = make((2,), torch.int64, 1002).to(dev)",
         "v1 = v0.expand([2, 2])",
         "v1.copy_(make((2, 2), torch.int64, 5).to(dev))"],
        lambda f: f["kind"] == "missing_error" and "single memory location" in f["detail"]),
    Bug("dtype_checks_missing",
        "ops CPU rejects for a dtype run on tpu: round/argmin on bool, integer pow to a "
        "negative integer, signbit into a non-bool out= (CPU: NotImplementedError/RuntimeError)",
        ["v0 = make((), torch.bool, 1005).to(dev)",
         "v1 = torch.round(v0)"],
        lambda f: f["kind"] == "missing_error" and re.search(
            r"not implemented for 'Bool'|does not support bool|negative integer powers|"
            r"non-boolean outputs|Found dtype \w+ but expected|cannot be converted to type",
            f["detail"])),
    Bug("out_into_view_of_input",
        "out= into a view of one of the inputs that must be resized raises ('output with shape "
        "[] doesn't match the broadcast shape', refusing to resize storage an input uses); CPU "
        "resizes the view and computes",
        ["v0 = make((1,), torch.float64, 943820).to(dev)",
         "v1 = make((), torch.float32, 930935).to(dev)",
         "v2 = v1.squeeze()",
         "torch.copysign(v1, v0, out=v2)"],
        lambda f: f["kind"] == "unexpected_error" and "out=" in _stmt(f)
        and ("input tensor and the written-to tensor" in f["detail"]
             or "match the broadcast shape" in f["detail"])),
    Bug("reduce_check_order",
        "std/var of a bool or integer tensor with an out-of-range dim raise IndexError (dim "
        "checked first, reduce.c), amax over dims [0, -2] of an empty 2-D tensor raises "
        "'dim 0 appears multiple times' (RuntimeError); CPU checks the dtype / the zero-size dim "
        "first and raises NotImplementedError / IndexError",
        ["v0 = make((), torch.bool, 1005).to(dev)",
         "v1 = torch.std(v0, dim=[5], correction=0, keepdim=True)"],
        lambda f: f["kind"] == "error_type" and re.search(
            r"std and var only support|appears multiple times", f["detail"])),
    Bug("div_bool_by_zero_scalar",
        "true division of a bool tensor by a zero Scalar gives 0.0 for False / 0 on tpu; CPU "
        "gives nan (0 / 0), as it does for int and float tensors (where tpu agrees)",
        ["v0 = make((2,), torch.bool, 1001).to(dev)",
         "v1 = torch.div(v0, False)"],
        lambda f: f["kind"] == "value" and re.search(r"torch\.div\(|/", _stmt(f))
        and "tpu 0.0 vs CPU nan" in f["detail"]),
]


@pytest.fixture(scope="module")
def worker():
    w = fuzz.Worker(timeout=60)
    w.start()
    yield w
    w.close()


@pytest.mark.parametrize("bug", [
    pytest.param(b, id=b.name, marks=pytest.mark.xfail(
        strict=True, raises=AssertionError, reason=f"{b.why}. Reproducer: {b.steps}"))
    for b in KNOWN])
def test_known_bug(bug, worker):
    r = worker.run({"steps": bug.steps, "check": "each"})
    if r["status"] == "ok":
        return  # fixed: XPASS, which strict mode turns into a failure: remove the entry
    k = r.get("step", r.get("at"))
    f = {"status": r["status"], "kind": r.get("kind"), "detail": r.get("detail") or "",
         "statement": bug.steps[k] if k is not None else None}
    if not _safe(bug.match, f):  # fails, but no longer for the known reason: a real failure
        pytest.fail(f"{bug.name}: the reproducer now fails differently: {r}")
    assert False, f"{bug.name}: {r['status']} {r.get('kind') or ''}: {r.get('detail')}"


def _known(f):
    """The name of the known bug a short-pass finding is an instance of, or None."""
    return next((b.name for b in KNOWN if _safe(b.match, f)), None)


def _safe(pred, f):
    try:
        return bool(pred(dict(f, kind=f.get("kind"), detail=f.get("detail") or "")))
    except Exception:
        return False


def test_fuzz_short_pass(tmp_path, capsys):
    s = fuzz.run_fuzz(seed=1234, programs=40, time_limit=35, out_dir=str(tmp_path),
                      timeout=30, minimize_budget=8, max_minimize=4, log=lambda *a: None)
    assert s["programs_run"] >= 20, f"only {s['programs_run']} programs ran in the time limit"
    assert s["counts"].get("harness_error", 0) == 0, s["findings"]
    new, known = [], []
    for f in s["findings"]:
        name = _known(f)
        (known if name else new).append((name, f))
    with capsys.disabled():
        for name, f in known:
            print(f"\n  fuzz: known bug {name} (x{f['count']}): {f['detail']}")
    if new:
        report = []
        for _, f in new:
            with open(f["path"]) as fh:
                body = fh.read()
            steps = body[body.index("STEPS = ["):body.index("\n]\n") + 2]
            report.append(f"{f['status']} {f['kind'] or ''} (x{f['count']}, program "
                          f"{f['index']}): {f['minimized_detail'] or f['detail']}\n{steps}")
        pytest.fail(f"{len(new)} new fuzz finding(s) (CPU vs tpu); reproducers in {tmp_path}:\n\n"
                    + "\n\n".join(report))
