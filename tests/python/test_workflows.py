"""End-to-end training and inference workflows that a CUDA script moved to "tpu" relies on.

Each test runs the same computation on PyTorch's CPU backend and on the tpu device, from the same
seed and the same initial weights (a CPU module deep-copied and moved with .to("tpu")), and
compares the results with dtype-aware tolerances. Ops without a native lowering may fall back to
CPU; these tests check correctness, not nativeness.
"""
import copy
import io
import warnings

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

from tpu_helpers import DEVICE, assert_same, make, tol

pytestmark = pytest.mark.usefixtures("quiet_fallbacks")

# A few f32 steps of training compound summation-order differences: a little looser than one op.
TRAIN_TOL = dict(rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------ helpers


def _mlp(seed=0, d_in=8, hidden=16, d_out=4):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, d_out))


def _pair(module):
    """(cpu_module, tpu_module) with identical weights."""
    return module, copy.deepcopy(module).to(DEVICE)


def _data(n=12, d_in=8, d_out=4, seed=1):
    return make((n, d_in), torch.float32, seed=seed, low=-1, high=1), \
        make((n, d_out), torch.float32, seed=seed + 1, low=-1, high=1)


def _assert_params(tpu_model, cpu_model, **kw):
    for (name, pt), (_, pc) in zip(tpu_model.named_parameters(), cpu_model.named_parameters()):
        try:
            assert_same(pt.detach(), pc.detach(), **kw)
        except AssertionError as e:
            raise AssertionError(f"parameter {name}: {e}") from None


def _assert_grads(tpu_model, cpu_model, **kw):
    for (name, pt), (_, pc) in zip(tpu_model.named_parameters(), cpu_model.named_parameters()):
        assert (pt.grad is None) == (pc.grad is None), name
        if pc.grad is not None:
            try:
                assert_same(pt.grad, pc.grad, **kw)
            except AssertionError as e:
                raise AssertionError(f"grad of {name}: {e}") from None


def _train(model, opt, x, y, steps, sched=None):
    loss_fn = nn.MSELoss()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.detach())
    return losses


# ------------------------------------------------------------------------------- Module.to


def test_module_to_tpu_and_back():
    cpu = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    dev = copy.deepcopy(cpu).to(DEVICE)
    for t in list(dev.parameters()) + list(dev.buffers()):
        assert t.device == torch.device(DEVICE, 0) and t.is_tpu
    assert dev[0].weight.is_leaf and dev[0].weight.requires_grad
    # the generated Module.tpu() / Tensor.tpu() helpers, and torch.device objects
    assert copy.deepcopy(cpu).tpu()[0].weight.is_tpu
    assert copy.deepcopy(cpu).to(torch.device(DEVICE, 0))[0].weight.is_tpu
    back = copy.deepcopy(dev).cpu()
    for (k, v), (_, w) in zip(back.state_dict().items(), cpu.state_dict().items()):
        assert v.device.type == "cpu", k
        torch.testing.assert_close(v, w, rtol=0, atol=0)
    # dtype conversion on the device
    half = copy.deepcopy(dev).to(torch.bfloat16)
    assert half[0].weight.dtype == torch.bfloat16 and half[0].weight.is_tpu
    assert_same(half[0].weight.detach(), cpu[0].weight.detach().to(torch.bfloat16), rtol=0, atol=0)


@pytest.mark.xfail(strict=True, reason=(
    "mse_loss on tpu reaches the CPU fallback as mse_loss.out with a 0-d out tensor; PyTorch's "
    "structured mse_loss.out meta resizes it to the elementwise shape and warns 'An output with "
    "one or more elements was resized since it had shape []' on every MSELoss call site (value "
    "is correct)"))
def test_mse_loss_emits_no_resize_warning():
    a, b = _data()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        loss = nn.functional.mse_loss(a.to(DEVICE), b.to(DEVICE))
    assert_same(loss, nn.functional.mse_loss(a, b))
    msgs = [str(w.message) for w in rec if "no native lowering" not in str(w.message)]
    assert not msgs, msgs


# ---------------------------------------------------------------------------------- optimizers

# (name, constructor, kwargs); every one of these accepts foreach=.
_OPTIMIZERS = [
    ("SGD", torch.optim.SGD, dict(lr=0.1)),
    ("SGD-momentum", torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    ("SGD-nesterov", torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, dampening=0)),
    ("Adam", torch.optim.Adam, dict(lr=1e-2)),
    ("Adam-amsgrad", torch.optim.Adam, dict(lr=1e-2, amsgrad=True, weight_decay=1e-2)),
    ("AdamW", torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    ("RMSprop", torch.optim.RMSprop, dict(lr=1e-2)),
    ("RMSprop-centered-momentum", torch.optim.RMSprop, dict(lr=1e-2, momentum=0.9, centered=True)),
    ("Adagrad", torch.optim.Adagrad, dict(lr=0.1, lr_decay=1e-3, weight_decay=1e-2)),
    ("Adadelta", torch.optim.Adadelta, dict(lr=1.0)),
    ("Adamax", torch.optim.Adamax, dict(lr=1e-2)),
    ("NAdam", torch.optim.NAdam, dict(lr=1e-2)),
    ("NAdam-decoupled", torch.optim.NAdam, dict(lr=1e-2, weight_decay=1e-2,
                                                decoupled_weight_decay=True)),
    ("RAdam", torch.optim.RAdam, dict(lr=1e-2)),
    ("ASGD", torch.optim.ASGD, dict(lr=1e-2, t0=1)),
    ("Rprop", torch.optim.Rprop, dict(lr=1e-2)),
]

# RAdam only leaves its warm-up (rho_t > 5) after 6 steps.
_STEPS = 7


@pytest.mark.parametrize("foreach", [False, True], ids=["loop", "foreach"])
@pytest.mark.parametrize("name,ctor,kw", _OPTIMIZERS, ids=[o[0] for o in _OPTIMIZERS])
def test_optimizer_matches_cpu(name, ctor, kw, foreach):
    cpu, dev = _pair(_mlp())
    x, y = _data()
    opt_c = ctor(cpu.parameters(), foreach=foreach, **kw)
    opt_t = ctor(dev.parameters(), foreach=foreach, **kw)
    lc = _train(cpu, opt_c, x, y, _STEPS)
    lt = _train(dev, opt_t, x.to(DEVICE), y.to(DEVICE), _STEPS)
    assert_same(torch.stack(lt), torch.stack(lc), **TRAIN_TOL)
    _assert_params(dev, cpu, **TRAIN_TOL)
    # optimizer state lives on the parameters' device
    for p in dev.parameters():
        for k, v in opt_t.state[p].items():
            if isinstance(v, torch.Tensor) and v.dim() > 0:
                assert v.device.type == DEVICE, (k, v.device)


_FUSED = [
    ("SGD", torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    ("Adam", torch.optim.Adam, dict(lr=1e-2)),
    ("AdamW", torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    ("Adagrad", torch.optim.Adagrad, dict(lr=0.1)),
]


@pytest.mark.parametrize("name,ctor,kw", _FUSED, ids=[o[0] for o in _FUSED])
def test_fused_optimizer_matches_cpu(name, ctor, kw):
    """fused=True is accepted for the PrivateUse1 device by torch.optim; the _fused_* kernels may
    fall back to CPU but must produce CPU's numbers."""
    cpu, dev = _pair(_mlp())
    x, y = _data()
    opt_c = ctor(cpu.parameters(), fused=True, **kw)
    opt_t = ctor(dev.parameters(), fused=True, **kw)
    _train(cpu, opt_c, x, y, 3)
    _train(dev, opt_t, x.to(DEVICE), y.to(DEVICE), 3)
    _assert_params(dev, cpu, **TRAIN_TOL)


def test_lbfgs_matches_cpu():
    cpu, dev = _pair(_mlp())
    x, y = _data()

    def run(model, x, y):
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=3)
        losses = []
        for _ in range(2):
            def closure():
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                return loss
            losses.append(opt.step(closure).detach())
        return losses

    lc = run(cpu, x, y)
    lt = run(dev, x.to(DEVICE), y.to(DEVICE))
    assert_same(torch.stack(lt), torch.stack(lc), **TRAIN_TOL)
    _assert_params(dev, cpu, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ LR schedulers


_SCHEDULERS = [
    ("StepLR", lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)),
    ("CosineAnnealingLR", lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5)),
    ("OneCycleLR", lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.2, total_steps=6)),
]


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("sname,make_sched", _SCHEDULERS, ids=[s[0] for s in _SCHEDULERS])
def test_lr_scheduler_matches_cpu(sname, make_sched, opt_name):
    cpu, dev = _pair(_mlp())
    x, y = _data()
    if opt_name == "SGD":
        mk = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
    else:
        mk = lambda ps: torch.optim.Adam(ps, lr=1e-2)  # noqa: E731
    opt_c, opt_t = mk(cpu.parameters()), mk(dev.parameters())
    s_c, s_t = make_sched(opt_c), make_sched(opt_t)
    lrs_c, lrs_t = [], []
    for _ in range(5):
        _train(cpu, opt_c, x, y, 1, s_c)
        _train(dev, opt_t, x.to(DEVICE), y.to(DEVICE), 1, s_t)
        lrs_c.append(s_c.get_last_lr())
        lrs_t.append(s_t.get_last_lr())
    assert lrs_t == lrs_c
    if sname == "OneCycleLR":  # momentum / betas cycle too
        key = "momentum" if opt_name == "SGD" else "betas"
        assert opt_t.param_groups[0][key] == opt_c.param_groups[0][key]
    _assert_params(dev, cpu, **TRAIN_TOL)


# ------------------------------------------------------- grad clipping, zero_grad, accumulation


def _clip_case(foreach, norm_type):
    cpu, dev = _pair(_mlp())
    x, y = _data()
    for m, xx, yy in ((cpu, x, y), (dev, x.to(DEVICE), y.to(DEVICE))):
        (nn.functional.mse_loss(m(xx), yy) * 100).backward()
    n_c = nn.utils.clip_grad_norm_(cpu.parameters(), 0.1, norm_type=norm_type, foreach=foreach)
    n_t = nn.utils.clip_grad_norm_(dev.parameters(), 0.1, norm_type=norm_type, foreach=foreach)
    assert_same(n_t, n_c)
    assert n_c.item() > 0.1  # clipping did happen
    _assert_grads(dev, cpu)
    total = nn.utils.get_total_norm([p.grad for p in dev.parameters()], norm_type=norm_type)
    assert total.item() == pytest.approx(0.1, rel=1e-4)


# linalg_vector_norm's executable cache key omits `ord`: within a process (and across processes,
# through the disk cache) the first norm order compiled for a shape/dtype is reused for every
# other order. Checking all three orders in one test makes the failure deterministic (at most one
# of them can be right), whatever the cache already holds.


@pytest.mark.parametrize("foreach", [False, True], ids=["loop", "foreach"])
def test_clip_grad_norm_matches_cpu(foreach):
    for norm_type in (2.0, 1.0, float("inf")):
        _clip_case(foreach, norm_type)


def test_vector_norm_orders_on_one_shape():
    c = make((3, 4), torch.float32, seed=11)
    t = c.to(DEVICE)
    got = [torch.linalg.vector_norm(t, o).item() for o in (2, 1, 3, float("inf"))]
    want = [torch.linalg.vector_norm(c, o).item() for o in (2, 1, 3, float("inf"))]
    assert got == pytest.approx(want, rel=1e-5)


def test_clip_grad_value_matches_cpu():
    cpu, dev = _pair(_mlp())
    x, y = _data()
    for m, xx, yy in ((cpu, x, y), (dev, x.to(DEVICE), y.to(DEVICE))):
        (nn.functional.mse_loss(m(xx), yy) * 100).backward()
        nn.utils.clip_grad_value_(m.parameters(), 0.05)
    _assert_grads(dev, cpu)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    _, dev = _pair(_mlp())
    x, y = _data()
    opt = torch.optim.SGD(dev.parameters(), lr=0.1)
    nn.functional.mse_loss(dev(x.to(DEVICE)), y.to(DEVICE)).backward()
    grads = [p.grad for p in dev.parameters()]
    assert all(g is not None and g.abs().sum().item() > 0 for g in grads)
    opt.zero_grad(set_to_none=set_to_none)
    for p, g in zip(dev.parameters(), grads):
        if set_to_none:
            assert p.grad is None
        else:
            assert p.grad is g  # zeroed in place, same tensor
            assert p.grad.device.type == DEVICE
            assert p.grad.abs().sum().item() == 0
    # and model.zero_grad too
    nn.functional.mse_loss(dev(x.to(DEVICE)), y.to(DEVICE)).backward()
    dev.zero_grad(set_to_none=set_to_none)
    for p in dev.parameters():
        assert (p.grad is None) if set_to_none else (p.grad.abs().sum().item() == 0)


def test_gradient_accumulation_two_micro_batches():
    cpu, dev = _pair(_mlp())
    x, y = _data(n=12)
    for m, xx, yy in ((cpu, x, y), (dev, x.to(DEVICE), y.to(DEVICE))):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):  # two optimizer steps of two micro-batches each
            opt.zero_grad()
            for xs, ys in zip(xx.chunk(2), yy.chunk(2)):
                (nn.functional.mse_loss(m(xs), ys) / 2).backward()
            opt.step()
    _assert_params(dev, cpu, **TRAIN_TOL)
    # accumulated micro-batch grads equal the full-batch grad (on the device)
    acc, full = _mlp().to(DEVICE), _mlp().to(DEVICE)
    xd, yd = x.to(DEVICE), y.to(DEVICE)
    for xs, ys in zip(xd.chunk(2), yd.chunk(2)):
        (nn.functional.mse_loss(acc(xs), ys) / 2).backward()
    nn.functional.mse_loss(full(xd), yd).backward()
    for pa, pf in zip(acc.parameters(), full.parameters()):
        assert_same(pa.grad, pf.grad.cpu())


# ---------------------------------------------------------------------------------- inference


def test_no_grad_and_inference_mode_forward():
    cpu, dev = _pair(_mlp())
    x, _ = _data()
    xd = x.to(DEVICE)
    ref = cpu(x).detach()
    with torch.no_grad():
        out = dev(xd)
    assert not out.requires_grad and out.grad_fn is None
    assert_same(out, ref)
    with torch.inference_mode():
        out2 = dev(xd)
    assert out2.is_inference() and not out2.requires_grad
    assert_same(out2, ref)
    dev.eval()
    with torch.inference_mode():
        assert_same(dev(xd), ref)
    # an inference tensor can be read (copied to CPU, used in no-grad arithmetic) afterwards
    assert_same(out2.clone() * 2, ref * 2)


# ------------------------------------------------------------------------- state dict, save/load


def test_state_dict_between_tpu_and_cpu_models():
    src_cpu = _mlp(seed=3)
    dev = _mlp(seed=4).to(DEVICE)
    # CPU state dict into a tpu model: tensors are copied onto the device
    dev.load_state_dict(src_cpu.state_dict())
    for k, v in dev.state_dict().items():
        assert v.device.type == DEVICE, k
        assert_same(v, src_cpu.state_dict()[k])
    # train on the device, then tpu state dict into a fresh CPU model
    opt = torch.optim.SGD(dev.parameters(), lr=0.1)
    x, y = _data()
    _train(dev, opt, x.to(DEVICE), y.to(DEVICE), 2)
    dst_cpu = _mlp(seed=5)
    dst_cpu.load_state_dict(dev.state_dict())
    for k, v in dst_cpu.state_dict().items():
        assert v.device.type == "cpu"
        torch.testing.assert_close(v, dev.state_dict()[k].cpu(), rtol=0, atol=0)


def test_optimizer_state_dict_resume_on_tpu():
    """Checkpoint written by a CPU run, resumed on the device: continues exactly like CPU."""
    cpu = _mlp()
    x, y = _data()
    opt_c = torch.optim.Adam(cpu.parameters(), lr=1e-2)
    _train(cpu, opt_c, x, y, 2)
    dev = copy.deepcopy(cpu).to(DEVICE)
    opt_t = torch.optim.Adam(dev.parameters(), lr=1e-2)
    opt_t.load_state_dict(copy.deepcopy(opt_c.state_dict()))
    for st in opt_t.state.values():
        assert st["exp_avg"].device.type == DEVICE
    _train(cpu, opt_c, x, y, 2)
    _train(dev, opt_t, x.to(DEVICE), y.to(DEVICE), 2)
    _assert_params(dev, cpu, **TRAIN_TOL)
    # and back: the device optimizer's state dict loads into a CPU optimizer
    cpu2 = copy.deepcopy(dev).cpu()
    opt_c2 = torch.optim.Adam(cpu2.parameters(), lr=1e-2)
    opt_c2.load_state_dict(opt_t.state_dict())
    for st in opt_c2.state.values():
        assert st["exp_avg"].device.type == "cpu"


def _saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


@pytest.mark.parametrize("map_location", ["cpu", "tpu", None], ids=["to-cpu", "to-tpu", "none"])
def test_save_load_tpu_state_dict(map_location):
    dev = _mlp(seed=6).to(DEVICE)
    sd = dev.state_dict()
    kw = {} if map_location is None else {"map_location": map_location}
    loaded = torch.load(_saved(sd), **kw)
    assert list(loaded) == list(sd)
    want = "cpu" if map_location == "cpu" else DEVICE
    for k, v in loaded.items():
        assert v.device.type == want, (k, v.device)
        torch.testing.assert_close(v.cpu(), sd[k].cpu(), rtol=0, atol=0)
    # it loads back into a model on either device
    m = _mlp(seed=7).to(DEVICE)
    m.load_state_dict(loaded)
    _assert_params(m, _mlp(seed=6), rtol=0, atol=0)


def test_save_load_tpu_tensor_directly():
    c = make((3, 5), torch.float32, seed=2)
    t = c.to(DEVICE)
    back = torch.load(_saved(t))
    assert back.device.type == DEVICE
    assert_same(back, c, rtol=0, atol=0)
    back_cpu = torch.load(_saved(t), map_location="cpu")
    assert back_cpu.device.type == "cpu"
    torch.testing.assert_close(back_cpu, c, rtol=0, atol=0)
    # other dtypes, and a CPU tensor mapped onto the device
    for dt in (torch.bfloat16, torch.int64, torch.bool):
        cd = make((4,), dt, seed=3)
        assert_same(torch.load(_saved(cd.to(DEVICE))), cd, rtol=0, atol=0)
    assert_same(torch.load(_saved(c), map_location=DEVICE), c, rtol=0, atol=0)


def test_save_load_tpu_views_share_storage():
    """Two views of one device storage are saved once and come back still sharing it."""
    base = make((4, 6), torch.float32, seed=4).to(DEVICE)
    a, b = base[1], base[:, 2]
    la, lb = torch.load(_saved([a, b]))
    assert la.device.type == lb.device.type == DEVICE
    assert_same(la, a.cpu(), rtol=0, atol=0)
    assert_same(lb, b.cpu(), rtol=0, atol=0)
    assert la.untyped_storage().data_ptr() == lb.untyped_storage().data_ptr()


# ---------------------------------------------------------------------------------- DataLoader


def _loader_run(model, device, pin_memory, non_blocking):
    xs, ys = _data(n=24)
    dl = DataLoader(TensorDataset(xs, ys), batch_size=8, shuffle=True,
                    generator=torch.Generator().manual_seed(0), pin_memory=pin_memory)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb, yb in dl:
        xb = xb.to(device, non_blocking=non_blocking)
        yb = yb.to(device, non_blocking=non_blocking)
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()


def test_dataloader_non_blocking_to_tpu():
    cpu, dev = _pair(_mlp())
    _loader_run(cpu, "cpu", False, False)
    _loader_run(dev, DEVICE, False, True)
    _assert_params(dev, cpu, **TRAIN_TOL)


def test_dataloader_pin_memory_does_not_crash():
    """pin_memory=True is accepted and training on the batches still matches CPU."""
    cpu, dev = _pair(_mlp())
    _loader_run(cpu, "cpu", False, False)
    _loader_run(dev, DEVICE, True, True)
    _assert_params(dev, cpu, **TRAIN_TOL)


def test_pinned_tensor_non_blocking_round_trip():
    c = make((64,), torch.float32, seed=5)
    t = c.pin_memory().to(DEVICE, non_blocking=True)
    back = torch.empty_like(c).pin_memory()
    back.copy_(t, non_blocking=True)
    torch.tpu.synchronize()
    torch.testing.assert_close(back, c, rtol=0, atol=0)
    torch.testing.assert_close(t.to("cpu", non_blocking=True), c, rtol=0, atol=0)


def test_pin_memory_pins():
    assert make((64,), torch.float32, seed=5).pin_memory().is_pinned()


def test_dataloader_pin_memory_batches_are_pinned():
    dl = DataLoader(TensorDataset(*_data(n=8)), batch_size=4, pin_memory=True)
    assert all(xb.is_pinned() and yb.is_pinned() for xb, yb in dl)


# ------------------------------------------------------------------------------ checkpointing


class _Block(nn.Module):
    def __init__(self, d=8, dropout=0.0):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.norm(x + self.lin2(self.drop(torch.nn.functional.gelu(self.lin1(x)))))


def test_activation_checkpoint_grads_match_cpu():
    torch.manual_seed(0)
    cpu, dev = _pair(nn.Sequential(_Block(), _Block()))
    x, _ = _data()
    for m, xx in ((cpu, x), (dev, x.to(DEVICE))):
        xx = xx.clone().requires_grad_()
        h = xx
        for blk in m:
            h = checkpoint(blk, h, use_reentrant=False)
        h.pow(2).sum().backward()
        m.input_grad = xx.grad
    _assert_grads(dev, cpu, rtol=1e-4, atol=1e-5)
    assert_same(dev.input_grad, cpu.input_grad, rtol=1e-4, atol=1e-5)


def test_activation_checkpoint_replays_dropout_on_tpu():
    """preserve_rng_state: the recomputation draws the same dropout mask, so checkpointed grads
    equal the plain ones on the device. (torch.manual_seed seeds the tpu generator too.)"""
    torch.manual_seed(0)
    blk = _Block(dropout=0.5).to(DEVICE)
    x = make((6, 8), torch.float32, seed=8).to(DEVICE)

    def grads(use_ckpt):
        blk.zero_grad(set_to_none=True)
        torch.manual_seed(123)
        out = checkpoint(blk, x, use_reentrant=False) if use_ckpt else blk(x)
        out.sum().backward()
        return [p.grad.cpu() for p in blk.parameters()]

    plain, ck = grads(False), grads(True)
    for a, b in zip(ck, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------- autocast


def test_autocast_context_can_be_entered():
    assert torch.amp.is_autocast_available(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        assert torch.is_autocast_enabled(DEVICE)
        assert torch.get_autocast_dtype(DEVICE) == torch.bfloat16
    assert not torch.is_autocast_enabled(DEVICE)
    # the device still works after leaving the context
    assert_same(torch.ones(3, device=DEVICE) + 1, torch.full((3,), 2.0))




def test_autocast_linear_runs():
    lin_c = nn.Linear(8, 4)
    lin_t = copy.deepcopy(lin_c).to(DEVICE)
    x, _ = _data()
    xd = x.to(DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = lin_t(xd)
    assert out.device.type == DEVICE
    # values agree with the f32 result at bf16 precision whatever dtype autocast chose
    torch.testing.assert_close(out.float().cpu(), lin_c(x).detach(), rtol=2e-2, atol=2e-2)


def test_autocast_linear_output_is_bfloat16_like_cpu_and_cuda():
    """Under autocast(dtype=bf16) a Linear runs in bf16 on CPU and CUDA; on "tpu" too, and the
    backward gives f32 grads for the f32 parameters."""
    lin_c = nn.Linear(8, 4)
    lin_t = copy.deepcopy(lin_c).to(DEVICE)
    x, _ = _data()
    xd = x.to(DEVICE)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = lin_c(x)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        out = lin_t(xd)
    assert ref.dtype == torch.bfloat16
    assert out.dtype == torch.bfloat16, f"autocast on tpu produced {out.dtype}"
    assert_same(out.detach(), ref.detach())
    out.float().sum().backward()
    ref.float().sum().backward()
    assert lin_t.weight.grad.dtype == torch.float32
    assert_same(lin_t.weight.grad, lin_c.weight.grad, **dict(zip(("rtol", "atol"),
                                                                  tol(torch.bfloat16))))


# ------------------------------------------------------------- small models, forward/backward


class _TextClassifier(nn.Module):
    def __init__(self, vocab=50, d=16, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.norm = nn.LayerNorm(d)
        self.act = nn.GELU()
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        h = self.act(self.norm(self.emb(tokens)))
        return self.head(h.mean(dim=1))


def test_embedding_layernorm_gelu_classifier_matches_cpu():
    torch.manual_seed(0)
    cpu, dev = _pair(_TextClassifier())
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 50, (6, 7), generator=g)
    tokens[0, :3] = 0  # some padding
    labels = torch.randint(0, 5, (6,), generator=g)
    labels[1] = -100  # ignored
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    loss_c = loss_fn(cpu(tokens), labels)
    loss_t = loss_fn(dev(tokens.to(DEVICE)), labels.to(DEVICE))
    assert_same(loss_t.detach(), loss_c.detach())
    loss_c.backward()
    loss_t.backward()
    _assert_grads(dev, cpu)
    assert dev.emb.weight.grad[0].abs().sum().item() == 0  # padding row gets no gradient
    # and one optimizer step
    for m in (cpu, dev):
        torch.optim.AdamW(m.parameters(), lr=1e-2).step()
    _assert_params(dev, cpu, **TRAIN_TOL)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def _cnn_two_train_steps():
    """Two forward/backward passes in train mode on CPU and tpu; checks outputs and grads."""
    torch.manual_seed(0)
    cpu, dev = _pair(_CNN())
    x = make((4, 3, 12, 12), torch.float32, seed=9, low=-1, high=1)
    labels = torch.tensor([1, 0, 7, 3])
    cpu.train()
    dev.train()
    for step in range(2):
        out_c = cpu(x)
        out_t = dev(x.to(DEVICE))
        assert_same(out_t.detach(), out_c.detach(), rtol=1e-4, atol=1e-5)
        loss_c = nn.functional.cross_entropy(out_c, labels)
        loss_t = nn.functional.cross_entropy(out_t, labels.to(DEVICE))
        assert_same(loss_t.detach(), loss_c.detach(), rtol=1e-4, atol=1e-5)
        cpu.zero_grad()
        dev.zero_grad()
        loss_c.backward()
        loss_t.backward()
        _assert_grads(dev, cpu, rtol=1e-4, atol=1e-5)
        x = x * 1.5 + 0.1  # different statistics for the second step
    return cpu, dev, x


def test_small_cnn_forward_backward_matches_cpu():
    cpu, dev, _ = _cnn_two_train_steps()
    for m in (cpu, dev):
        torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9).step()
    _assert_params(dev, cpu, rtol=1e-4, atol=1e-5)
    assert dev.features[1].num_batches_tracked.item() == 2


def test_small_cnn_batchnorm_running_stats_update_like_cpu():
    cpu, dev, x = _cnn_two_train_steps()
    # BatchNorm running statistics updated exactly like CPU (and stayed on the device)
    for (name, bt), (_, bc) in zip(dev.named_buffers(), cpu.named_buffers()):
        assert bt.device.type == DEVICE, name
        try:
            assert_same(bt, bc, rtol=1e-5, atol=1e-6)
        except AssertionError as e:
            raise AssertionError(f"buffer {name}: {e}") from None
    # eval mode uses the running statistics
    cpu.eval()
    dev.eval()
    with torch.no_grad():
        assert_same(dev(x.to(DEVICE)), cpu(x), rtol=1e-4, atol=1e-5)
