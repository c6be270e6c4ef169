"""Optimizer steps and gradient scaling on tpu against CPU, with no CPU fallback.

torch.optim.Adam/AdamW(fused=True) (HF Trainer's default optimizer, "adamw_torch_fused") run
_fused_adam_/_fused_adamw_, and torch.amp.GradScaler runs _amp_foreach_non_finite_check_and_unscale_
and _amp_update_scale_. CPU has fused kernels for all four, which are the oracle. The fused step
computes as CPU's kernel does (per-step factors in f64, half types in f32 rounded once), so half
types match CPU exactly here and f32/f64 within an ulp or two. Each test also asserts that nothing
fell back to CPU.
"""
import copy

import pytest
import torch
from torch import nn

import torch_pjrt
from tpu_helpers import DEVICE, FLOAT_DTYPES, assert_same, fallbacks, make

SHAPES = [(5, 3), (7,), (), (33,)]  # a 0-d parameter too


@pytest.fixture(autouse=True)
def _no_fallbacks(fresh_stats):
    yield
    assert fallbacks() == {}, f"ops fell back to CPU: {fallbacks()}"


def _params(dtype, dev, seed=0):
    return [make(s, dtype, seed=seed + k, low=-2, high=2).to(dev).requires_grad_()
            for k, s in enumerate(SHAPES)]


def _grad(p, step, k, scale=1.0):
    g = make(p.shape, torch.float32, seed=100 * step + k, low=-1, high=1) * scale
    return g.to(p.dtype).to(p.device)


def _step(opt, ps, step, dev):
    """Sets the fixed gradients of |step| on |ps| and steps |opt|; on tpu, in strict mode."""
    for k, p in enumerate(ps):
        p.grad = _grad(p, step, k)
    with torch_pjrt.strict(dev == DEVICE):
        opt.step()


def _train(dev, cls, dtype, steps=4, lr_schedule=None, **kw):
    """|steps| optimizer steps of fixed gradients; the parameters and the optimizer's state."""
    ps = _params(dtype, dev)
    opt = cls(ps, lr=1e-2, **kw)
    for step in range(steps):
        if lr_schedule:
            for group in opt.param_groups:
                group["lr"] = lr_schedule(step)
        _step(opt, ps, step, dev)
    return [p.detach() for p in ps], [opt.state[p][key] for p in ps for key in sorted(opt.state[p])]


def _assert_all_same(tpu, cpu, **kw):
    assert len(tpu) == len(cpu)
    for a, b in zip(tpu, cpu):
        assert_same(a, b, **kw)


CONFIGS = {
    "plain": {},
    "amsgrad": {"amsgrad": True},
    "maximize": {"maximize": True},
    "weight_decay": {"weight_decay": 0.1},
    "all": {"amsgrad": True, "maximize": True, "weight_decay": 0.05, "betas": (0.8, 0.95), "eps": 1e-6},
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW], ids=lambda c: c.__name__)
def test_fused_step_matches_cpu_fused(cls, config, dtype):
    kw = dict(CONFIGS[config], fused=True)
    tpu_p, tpu_s = _train(DEVICE, cls, dtype, **kw)
    cpu_p, cpu_s = _train("cpu", cls, dtype, **kw)
    _assert_all_same(tpu_p, cpu_p)
    _assert_all_same(tpu_s, cpu_s)
    if dtype in (torch.float16, torch.bfloat16):  # f32 math rounded once: CPU's bits exactly
        _assert_all_same(tpu_p, cpu_p, rtol=0, atol=0)


@pytest.mark.parametrize("cls", [torch.optim.Adam, torch.optim.AdamW], ids=lambda c: c.__name__)
def test_fused_step_matches_cpu_foreach(cls):
    # The unfused path (foreach on CPU) computes the same step op by op.
    kw = {"amsgrad": True, "weight_decay": 0.1}
    tpu_p, _ = _train(DEVICE, cls, torch.float32, fused=True, **kw)
    cpu_p, _ = _train("cpu", cls, torch.float32, foreach=True, **kw)
    _assert_all_same(tpu_p, cpu_p)


def test_many_and_strided_parameters():
    # More parameters than one call takes arguments, some of them transposed (their state is
    # made with the same strides, their gradients are contiguous). CPU's fused kernel pairs
    # elements by memory order, which mixes them up here: the unfused step is the oracle.
    def run(dev, **kw):
        ps = [make((3, 4) if k % 2 else (4, 3), torch.float32, seed=k).to(dev) for k in range(40)]
        ps = [(p.t() if k % 2 else p).detach().requires_grad_() for k, p in enumerate(ps)]
        opt = torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, **kw)
        for step in range(2):
            _step(opt, ps, step, dev)
        return [p.detach() for p in ps]
    tpu, cpu = run(DEVICE, fused=True), run("cpu", foreach=True)
    assert not tpu[1].is_contiguous()
    _assert_all_same(tpu, cpu)


def test_learning_rate_schedule_compiles_once():
    # The learning rate is a program input: a schedule changing it every step compiles nothing
    # after the first step (one program per parameter shape).
    schedule = lambda step: 1e-2 / (1 + step)
    _train(DEVICE, torch.optim.AdamW, torch.float32, steps=1, fused=True, lr_schedule=schedule)
    torch_pjrt.reset_stats()
    tpu_p, tpu_s = _train(DEVICE, torch.optim.AdamW, torch.float32, steps=3, fused=True,
                          lr_schedule=schedule)
    stats = torch_pjrt.stats()
    assert stats["compiles"] + stats["disk_cache_hits"] == 0, stats
    cpu_p, cpu_s = _train("cpu", torch.optim.AdamW, torch.float32, steps=3, fused=True,
                          lr_schedule=schedule)
    _assert_all_same(tpu_p, cpu_p)
    _assert_all_same(tpu_s, cpu_s)


@pytest.mark.parametrize("lr_device", ["cpu", DEVICE])
def test_tensor_lr(lr_device):
    # Adam(lr=tensor, fused=True) calls the .tensor_lr overloads; a CPU lr is passed as it is.
    def run(dev, lr_dev):
        ps = _params(torch.float32, dev)
        opt = torch.optim.AdamW(ps, lr=torch.tensor(3e-3, device=lr_dev), fused=True, amsgrad=True)
        for step in range(3):
            _step(opt, ps, step, dev)
        return [p.detach() for p in ps]
    _assert_all_same(run(DEVICE, lr_device), run("cpu", "cpu"))


def _direct_call(fn, dev, dtype, *, grad_scale, found_inf, amsgrad=False, lr=1e-2):
    """One call of torch._fused_adam(w)_ with grad_scale/found_inf: every list it updates."""
    ps = [t.detach() for t in _params(dtype, dev)]
    gs = [_grad(p, 0, k, scale=1024.0) for k, p in enumerate(ps)]
    ms = [make(p.shape, dtype, seed=7 + k, low=-0.1, high=0.1).to(dev) for k, p in enumerate(ps)]
    vs = [make(p.shape, dtype, seed=17 + k, low=0, high=0.1).to(dev) for k, p in enumerate(ps)]
    mx = [v * 2 for v in vs] if amsgrad else []
    steps = [torch.tensor(3.0, device=dev) for _ in ps]
    extra = {}
    if grad_scale is not None:
        extra["grad_scale"] = torch.tensor(grad_scale, device=dev)
    if found_inf is not None:
        extra["found_inf"] = torch.tensor(found_inf, device=dev)
    with torch_pjrt.strict(dev == DEVICE):
        fn(ps, gs, ms, vs, mx, steps, lr=lr, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8,
           amsgrad=amsgrad, maximize=False, **extra)
    return ps + gs + ms + vs + mx + steps


@pytest.mark.parametrize("found_inf", [None, 0.0, 1.0])
@pytest.mark.parametrize("grad_scale", [None, 1024.0])
@pytest.mark.parametrize("fn", [torch._fused_adam_, torch._fused_adamw_], ids=lambda f: f.__name__)
def test_grad_scale_and_found_inf(fn, grad_scale, found_inf):
    # grad_scale divides each gradient, in place; found_inf == 1 skips the whole step (nothing is
    # written, the gradients stay scaled).
    for dtype in (torch.float32, torch.bfloat16):
        tpu = _direct_call(fn, DEVICE, dtype, grad_scale=grad_scale, found_inf=found_inf, amsgrad=True)
        cpu = _direct_call(fn, "cpu", dtype, grad_scale=grad_scale, found_inf=found_inf, amsgrad=True)
        _assert_all_same(tpu, cpu)
        if found_inf == 1.0:
            untouched = _direct_call(lambda *a, **k: None, "cpu", dtype, grad_scale=None,
                                     found_inf=None, amsgrad=True)
            _assert_all_same(tpu, untouched, rtol=0, atol=0)


def test_fused_step_argument_errors():
    ps = [torch.zeros(3, device=DEVICE)]
    gs, ms, vs = ([torch.zeros(3, device=DEVICE)] for _ in range(3))
    steps = [torch.tensor(1.0, device=DEVICE)]
    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, maximize=False)
    with pytest.raises(RuntimeError, match="same length"):
        torch._fused_adamw_(ps, gs + gs, ms, vs, [], steps, amsgrad=False, **kw)
    with pytest.raises(RuntimeError, match="max_exp_avg_sqs"):
        torch._fused_adamw_(ps, gs, ms, vs, [], steps, amsgrad=True, **kw)
    with pytest.raises(RuntimeError, match="shape"):
        torch._fused_adamw_(ps, [torch.zeros(4, device=DEVICE)], ms, vs, [], steps, amsgrad=False, **kw)
    with pytest.raises(RuntimeError, match="grad_scale must be a float tensor"):
        torch._fused_adamw_(ps, gs, ms, vs, [], steps, amsgrad=False,
                            grad_scale=torch.tensor(2.0, dtype=torch.float64, device=DEVICE), **kw)
    # A refused call wrote nothing, even for the lists' good first index.
    p2 = [torch.ones(3, device=DEVICE), torch.ones(2, device=DEVICE)]
    with pytest.raises(RuntimeError, match="index 1"):
        torch._fused_adamw_(p2, [torch.ones(3, device=DEVICE), torch.ones(3, device=DEVICE)],
                            [torch.zeros(3, device=DEVICE)] * 2, [torch.zeros(3, device=DEVICE)] * 2,
                            [], steps * 2, amsgrad=False, **kw)
    assert_same(p2[0], torch.ones(3), rtol=0, atol=0)


# ---- GradScaler's kernels ----

def _grads(dev, poison=None):
    """Gradients of several dtypes; |poison| (a value) goes into the bf16 one."""
    gs = [make((4, 3), torch.float32, seed=1), make((5,), torch.bfloat16, seed=2),
          make((), torch.float16, seed=3), make((2, 2), torch.float64, seed=4)]
    if poison is not None:
        gs[1][2] = poison
    return [g.to(dev) for g in gs]


@pytest.mark.parametrize("poison", [None, float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("inv_scale", [1.0, 2.0 ** -10])
@pytest.mark.parametrize("found_before", [0.0, 1.0])
def test_non_finite_check_and_unscale(poison, inv_scale, found_before):
    def run(dev):
        gs = _grads(dev, poison)
        found = torch.tensor([found_before], device=dev)
        with torch_pjrt.strict(dev == DEVICE):
            torch._amp_foreach_non_finite_check_and_unscale_(gs, found,
                                                             torch.tensor(inv_scale, device=dev))
        return gs + [found]
    tpu, cpu = run(DEVICE), run("cpu")
    _assert_all_same(tpu, cpu, rtol=0, atol=0)
    assert tpu[-1].item() == (1.0 if poison is not None or found_before else 0.0)


def test_non_finite_check_argument_errors():
    check = torch._amp_foreach_non_finite_check_and_unscale_
    gs, found, one = _grads(DEVICE), torch.zeros(1, device=DEVICE), torch.ones(1, device=DEVICE)
    with pytest.raises(RuntimeError, match="inv_scale must be a float tensor"):
        check(gs, found, one.double())
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element tensor"):
        check(gs, torch.zeros(2, device=DEVICE), one)
    assert_same(gs[0], _grads("cpu")[0], rtol=0, atol=0)  # refused calls wrote nothing
    check([], found, one)  # nothing to do
    assert found.item() == 0.0


def test_update_scale_matches_cpu():
    # A run of found_inf values through growth (interval 3), backoff, NaN (counts as found) and a
    # scale that would grow past f32's range (it stays).
    found_seq = [0, 0, 0, 1, 0, float("nan"), 0, 0, 0, 0, 0, 0]
    for growth, backoff, start in [(2.0, 0.5, 2.0 ** 16), (1.7, 0.3, 1000.0), (4.0, 0.5, 3e38)]:
        def run(dev):
            scale = torch.tensor([start], device=dev)
            tracker = torch.zeros(1, dtype=torch.int32, device=dev)
            history = []
            for f in found_seq:
                with torch_pjrt.strict(dev == DEVICE):
                    ret = torch._amp_update_scale_(scale, tracker, torch.tensor([float(f)], device=dev),
                                                   growth, backoff, 3)
                assert ret is scale
                history += [scale.clone(), tracker.clone()]
            return history
        _assert_all_same(run(DEVICE), run("cpu"), rtol=0, atol=0)


def test_update_scale_argument_errors():
    scale, found = torch.ones(1, device=DEVICE), torch.zeros(1, device=DEVICE)
    with pytest.raises(RuntimeError, match="growth_tracker must be an int tensor"):
        torch._amp_update_scale_(scale, torch.zeros(1, device=DEVICE), found, 2.0, 0.5, 10)
    with pytest.raises(RuntimeError, match="current_scale must be a 1-element tensor"):
        torch._amp_update_scale_(torch.ones(2, device=DEVICE),
                                 torch.zeros(1, dtype=torch.int32, device=DEVICE), found, 2.0, 0.5, 10)


# ---- a mixed-precision training loop ----

def _scaled_training(dev, fused, inf_step=2, steps=5):
    """A GradScaler loop under autocast (bfloat16) that meets an inf at |inf_step|. Returns the
    parameters and the scale after each step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    model = copy.deepcopy(model).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=fused, foreach=None if fused else True)
    scaler = torch.amp.GradScaler(dev, init_scale=2.0 ** 8, growth_interval=2)
    x, y = make((4, 6), torch.float32, seed=1).to(dev), make((4, 2), torch.float32, seed=2).to(dev)
    history = []
    for step in range(steps):
        opt.zero_grad()
        with torch_pjrt.strict(dev == DEVICE):
            with torch.autocast(dev if dev == "cpu" else "tpu", dtype=torch.bfloat16):
                loss = nn.functional.mse_loss(model(x).float(), y)
            if step == inf_step:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        history.append(([p.detach().clone() for p in model.parameters()], scaler.get_scale()))
    return history


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_grad_scaler_training_skips_the_inf_step(fused):
    tpu, cpu = _scaled_training(DEVICE, fused), _scaled_training("cpu", fused)
    # The scale: 256, 512 (two good steps), 256 (the inf), 256, 512: exactly as on CPU.
    assert [s for _, s in tpu] == [s for _, s in cpu] == [256.0, 512.0, 256.0, 256.0, 512.0]
    before, skipped = tpu[1][0], tpu[2][0]
    _assert_all_same(skipped, [p.cpu() for p in before], rtol=0, atol=0)  # the step was skipped
    for (tp, _), (cp, _) in zip(tpu, cpu):
        _assert_all_same(tp, cp, rtol=1e-2, atol=1e-2)  # bfloat16 matmuls


def test_tpu_amp_names():
    # torch.tpu.amp's GradScaler is torch.amp.GradScaler("tpu") and runs natively too.
    scaler = torch.tpu.amp.GradScaler(init_scale=4.0)
    p = nn.Parameter(torch.ones(3, device=DEVICE))
    opt = torch.optim.Adam([p], lr=0.1, fused=True)
    with torch_pjrt.strict(), torch.tpu.amp.autocast():
        loss = (p * 2).sum()
    with torch_pjrt.strict():
        scaler.scale(loss).backward()
        assert_same(p.grad, torch.full((3,), 8.0))
        scaler.step(opt)
        scaler.update()
    assert_same(p.detach(), torch.full((3,), 0.9), rtol=1e-6, atol=1e-6)
