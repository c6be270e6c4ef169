"""complex64 as a device type and the FFT family (torch.fft.*) lowered natively.

Each case runs in strict mode, so any CPU fallback anywhere in the call fails the test, and
compares with PyTorch's CPU result (pocketfft) at complex64 tolerances.
"""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, make

TOL = dict(rtol=2e-5, atol=2e-5)


def cplx(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=torch.cfloat, generator=g)


def check(fn, *inputs, tol=TOL):
    expected = fn(*inputs)
    with torch_pjrt.strict():
        actual = fn(*[x.to(DEVICE) for x in inputs])
    assert actual.device.type == DEVICE and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, **tol)


REAL_CASES = [
    ("fft", lambda x: torch.fft.fft(x)),
    ("fft_n_dim0", lambda x: torch.fft.fft(x, n=7, dim=0, norm="ortho")),
    ("ifft", lambda x: torch.fft.ifft(x, dim=1)),
    ("rfft", lambda x: torch.fft.rfft(x)),
    ("rfft_forward", lambda x: torch.fft.rfft(x, n=9, dim=0, norm="forward")),
    ("irfft", lambda x: torch.fft.irfft(x)),
    ("irfft_odd", lambda x: torch.fft.irfft(x, n=7, norm="ortho")),
    ("hfft", lambda x: torch.fft.hfft(x)),
    ("ihfft", lambda x: torch.fft.ihfft(x, norm="forward")),
    ("fft2", lambda x: torch.fft.fft2(x)),
    ("ifft2", lambda x: torch.fft.ifft2(x, s=(3, 5))),
    ("rfft2", lambda x: torch.fft.rfft2(x, norm="ortho")),
    ("irfft2", lambda x: torch.fft.irfft2(x, s=(4, 9))),
    ("hfft2", lambda x: torch.fft.hfft2(x)),
    ("ihfft2", lambda x: torch.fft.ihfft2(x)),
    ("fftn_all", lambda x: torch.fft.fftn(x)),
    ("rfftn_all", lambda x: torch.fft.rfftn(x)),
    ("irfftn_all", lambda x: torch.fft.irfftn(x, norm="forward")),
    ("hfftn", lambda x: torch.fft.hfftn(x, dim=(0, 2))),
    ("ihfftn", lambda x: torch.fft.ihfftn(x, dim=(2, 0))),
]


@pytest.mark.parametrize("name,fn", REAL_CASES, ids=[c[0] for c in REAL_CASES])
def test_fft_of_real_input(name, fn):
    check(fn, make((4, 6, 5), torch.float32))


def test_fft_of_integer_and_bool_input():
    check(lambda x: torch.fft.rfft2(x), make((4, 6), torch.int64))
    check(lambda x: torch.fft.fftn(x), make((3, 4), torch.bool))


def test_fft_over_more_than_three_dims():
    # stablehlo.fft transforms at most 3 trailing dims: 4 and 5 dims take several transforms
    x = make((2, 3, 4, 5, 3), torch.float32)
    check(lambda v: torch.fft.fftn(v), x)
    check(lambda v: torch.fft.rfftn(v, dim=(4, 0, 1, 3)), x)
    check(lambda v: torch.fft.irfftn(v, dim=(0, 1, 2, 3)), x)
    check(lambda v: torch.fft.ifftn(v, norm="ortho"), cplx((2, 3, 2, 4), seed=1))


@pytest.mark.parametrize("norm", [None, "ortho", "forward", "backward"])
def test_complex_transforms(norm):
    z = cplx((5, 4, 6), seed=2)
    check(lambda v: torch.fft.fft(v, norm=norm), z)
    check(lambda v: torch.fft.ifft(v, dim=0, norm=norm), z)
    check(lambda v: torch.fft.fftn(v, dim=(2, 0), norm=norm), z)
    check(lambda v: torch.fft.irfft(v, n=8, norm=norm), z)   # crops the input's last dim
    check(lambda v: torch.fft.irfft(v, n=13, norm=norm), z)  # pads it
    check(lambda v: torch.fft.hfft(v, norm=norm), z)


def test_fft_out_and_noncontiguous():
    x = make((6, 8), torch.float32)
    out = torch.empty(0, dtype=torch.cfloat, device=DEVICE)
    with torch_pjrt.strict():
        torch.fft.rfft(x.to(DEVICE).t(), out=out)
    torch.testing.assert_close(out.cpu(), torch.fft.rfft(x.t()), **TOL)


def test_fft_backward():
    x = make((4, 6), torch.float32)
    for fn in (torch.fft.fft, torch.fft.rfft2, torch.fft.ihfft, lambda v: torch.fft.irfft(torch.fft.fft(v))):
        ref = x.clone().requires_grad_()
        fn(ref).abs().sum().backward()
        t = x.to(DEVICE).requires_grad_()
        with torch_pjrt.strict():
            fn(t).abs().sum().backward()
        torch.testing.assert_close(t.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-4)


def test_complex_storage_and_real_views():
    z = cplx((3, 4), seed=3)
    with torch_pjrt.strict():
        t = z.to(DEVICE)
        assert torch_pjrt._C.storage_buffer_dtype(t) == "float32"  # interleaved parts
        r = torch.view_as_real(t)
        assert torch.equal(r.cpu(), torch.view_as_real(z))
        assert torch.equal(t.real.cpu(), z.real) and torch.equal(t.imag.cpu(), z.imag)
        back = torch.view_as_complex(r * 2)
        assert torch.equal(back.cpu(), z * 2)
        assert torch.equal(t.t().contiguous().cpu(), z.t().contiguous())
        assert t[1, 2].item() == z[1, 2].item()


def test_conjugate_and_negative_bits_in_copies():
    z = cplx((3, 5), seed=4)
    with torch_pjrt.strict():
        t = z.to(DEVICE)
        assert torch.equal(t.conj().resolve_conj().cpu(), z.conj().resolve_conj())
        assert torch.equal(t.conj().imag.clone().cpu(), z.conj().imag.clone())  # a negative view
        dst = torch.zeros(3, 5, dtype=torch.cfloat, device=DEVICE).conj()
        dst.copy_(t)  # dst's conjugate bit: its storage holds conj(z)
        assert torch.equal(dst.cpu(), z) and torch.equal(dst.conj().cpu(), z.conj())
        host = torch.empty(3, 5, dtype=torch.cfloat)
        host.copy_(t.conj())
        assert torch.equal(host, z.conj())
        u = torch.empty(3, 5, dtype=torch.cfloat, device=DEVICE)
        u.copy_(z.conj())  # a host tensor with the bit
        assert torch.equal(u.cpu(), z.conj())
        assert torch.equal(torch.conj_physical(t).cpu(), torch.conj_physical(z))


def test_complex_arithmetic_and_data_movement():
    a, b = cplx((3, 4), seed=5), cplx((3, 4), seed=6)
    f = make((3, 4), torch.float32)
    check(lambda x, y: x * y + x / y - y, a, b)
    check(lambda x, y: x * y, a, f)        # complex64 with float32
    check(lambda x: x * (1 + 2j) - 0.5j, a)  # Python complex numbers
    check(lambda x: -x, a)
    check(lambda x: x.abs(), a)
    check(lambda x: x.sgn(), a)
    check(lambda x: x.sum(), a)
    check(lambda x: x.sum(1), a)
    check(lambda x, y: torch.cat([x, y], 1), a, b)
    check(lambda x: torch.nn.functional.pad(x, (1, 2)), a)
    check(lambda x, y: torch.where(x.real > 0, x, y), a, b)
    check(lambda x: torch.fft.fftshift(x), a)  # roll
    check(lambda x: x.flip(0), a)
    check(lambda x: x.index_select(1, torch.tensor([2, 0], device=x.device)), a)
    check(lambda x, y: torch.complex(x, y), f, make((3, 4), torch.float32, seed=1))
    check(lambda x, y: torch.polar(x.abs(), y), f, make((3, 4), torch.float32, seed=1))
    check(lambda x: x.to(torch.cfloat), f)
    check(lambda x: x.to(torch.float32), a)
    check(lambda x: x.to(torch.bool), a)
    with torch_pjrt.strict():
        t = torch.empty(2, 3, dtype=torch.cfloat, device=DEVICE)
        t.fill_(1 - 2j)
        assert torch.equal(t.cpu(), torch.full((2, 3), 1 - 2j))
        t.mul_(2j)
        assert torch.equal(t.cpu(), torch.full((2, 3), (1 - 2j) * 2j))
        t.zero_()
        assert torch.equal(t.cpu(), torch.zeros(2, 3, dtype=torch.cfloat))


def test_complex_ops_without_a_complex_lowering_fall_back():
    # rows not written for complex keep complex calls on CPU (a counted fallback), never wrong
    z = cplx((3, 4), seed=7)
    torch_pjrt._C.reset_stats()
    with pytest.warns(UserWarning):
        r = torch.exp(z.to(DEVICE))
    torch.testing.assert_close(r.cpu(), torch.exp(z), **TOL)
    assert "exp" in torch_pjrt._C.stats()["fallbacks"]


def test_complex128_and_float64_transforms():
    x = make((4, 6, 5), torch.float64)
    z = torch.randn(3, 4, dtype=torch.cdouble, generator=torch.Generator().manual_seed(9))
    tight = dict(rtol=1e-10, atol=1e-10)
    with torch_pjrt.strict():
        t = z.to(DEVICE)
        assert torch_pjrt._C.storage_buffer_dtype(t) == "float64"
        assert torch.equal(t.cpu(), z) and t[1, 2].item() == z[1, 2].item()
        assert torch.equal(t.to(torch.cfloat).cpu(), z.to(torch.cfloat))
    check(lambda v: torch.fft.fftn(v, dim=(0, 2), norm="ortho"), x, tol=tight)
    check(lambda v: torch.fft.irfft2(torch.fft.rfft2(v)), x, tol=tight)
    check(lambda v: torch.fft.ifft(v) * (2 - 1j) + v.abs(), z, tol=tight)
    check(lambda v, w: v * w, z, cplx((3, 4), seed=10))  # complex128 with complex64
    check(lambda v, w: torch.complex(v, w), x, x.flip(0), tol=tight)


def test_compiled_spectral_filter_runs_as_one_program():
    import torch_pjrt.compile as tc

    def f(x, w):  # an FNO-style spectral layer: transform, scale the modes, transform back
        z = torch.fft.rfft(x, dim=-1)
        return torch.fft.irfft(z * w, n=x.shape[-1], dim=-1) + x

    x = make((4, 16), torch.float32)
    w = cplx((9,), seed=8)
    torch._dynamo.reset()
    tc.reset_stats()
    got = torch.compile(f, backend="tpu")(x.to(DEVICE), w.to(DEVICE))
    torch.testing.assert_close(got.cpu(), f(x, w), **TOL)
    s = tc.stats()
    assert s["splits"] == {}, s["split_reasons"]
    torch._dynamo.reset()
