"""The special functions of torch.special against PyTorch on CPU, with no CPU fallback: the
sinc, entr, i0/i1 (and scaled), erfcx, log_ndtr, digamma (with the smooth activations hardsigmoid,
hardswish, mish, logsigmoid), ndtri, polygamma and zeta, at special values and random inputs;
the Bessel and Airy functions, the orthogonal polynomials and the incomplete gamma functions
(special.c): special values, integer and bool promotion, the Scalar overloads, degrees that take
each kernel's special cases, its trigonometric form and its recurrence, every method of igamma,
out=, and a compiled graph."""
import time

import pytest
import torch

from tpu_helpers import BF16, DEVICE, F32, F64, assert_same, check_native, dname, make


BESSEL = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
          "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
          "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"]

# Each kernel's branch points (1e-5, 0.5, 2, 2.09, 5, 8, 8.32, 103.892) from both sides, zeros,
# infinities and NaN.
POINTS = [0.0, -0.0, 1e-6, -1e-6, 1e-3, 0.49, 0.5, -0.5, 1.0, -1.0, 1.99, 2.0, 2.01, 2.08, 2.09,
          -2.09, -2.1, 4.99, 5.0, 5.01, -5.0, 7.99, 8.0, 8.01, -8.0, 8.32, 8.33, 30.0, -30.0,
          95.0, 103.0, 104.0, -104.0, float("inf"), -float("inf"), float("nan")]


@pytest.mark.parametrize("dtype", [F32, F64], ids=dname)
@pytest.mark.parametrize("name", BESSEL)
def test_bessel_values(name, dtype):
    fn = getattr(torch.special, name)
    x = torch.cat([torch.tensor(POINTS), make((64,), F64, seed=3, low=-12, high=12)]).to(dtype)
    kw = {"rtol": 2e-5, "atol": 1e-6} if dtype == F32 else {"rtol": 1e-12, "atol": 1e-14}
    check_native(fn, x, **kw)


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_promotes_integers_and_bool(name):
    fn = getattr(torch.special, name)
    check_native(fn, torch.tensor([[-3, 0, 2], [5, 1, -1]]), rtol=2e-5, atol=1e-6)
    check_native(fn, torch.tensor([True, False]), rtol=2e-5, atol=1e-6)


def test_bessel_half_raises_cpu_error():
    # CPU has no 16-bit kernels: the call falls back and CPU raises its own error.
    with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
        torch.special.bessel_j0(torch.ones(2, dtype=torch.bfloat16, device=DEVICE))


def test_bessel_out_and_backward():
    x = make((3, 4), F32, seed=4, low=0.5, high=9)
    check_native(lambda t: torch.special.bessel_j0(t, out=torch.empty_like(t)), x, rtol=2e-5, atol=1e-6)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        torch.special.bessel_j0(xd).sum().backward()  # -J1
        grads.append(xd.grad)
    assert_same(grads[1], grads[0], rtol=2e-5, atol=1e-6)


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]

XS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-9, -1e-9, 0.3, -0.7, 0.999, 1.5, -2.0, 3.0, 9.0, -9.0,
      float("inf"), -float("inf"), float("nan")]
# Degrees: negative, 0 and 1, the recurrence, the trigonometric forms (above 4, 6 or 8),
# fractions (truncated), and NaN/inf (taken as negative). Far larger degrees in float32 take
# cos(n acos(x)) with acos an ulp off CPU's, n times magnified: not compared here.
NS = [-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 12.0, 20.0, 2.7, -0.5,
      float("nan"), float("inf"), -float("inf")]


@pytest.mark.parametrize("dtype", [F32, F64], ids=dname)
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_grid(name, dtype):
    fn = getattr(torch.special, name)
    xs = torch.cat([torch.tensor(XS), make((6,), F64, seed=5, low=-1, high=1)])
    x, n = torch.meshgrid(xs.to(dtype), torch.tensor(NS, dtype=dtype), indexing="ij")
    kw = {"rtol": 1e-5, "atol": 1e-5} if dtype == F32 else {"rtol": 1e-10, "atol": 1e-10}
    check_native(fn, x, n, **kw)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial_overloads_and_promotion(name):
    fn = getattr(torch.special, name)
    x = make((5, 1), F32, seed=6, low=-1.5, high=1.5)
    n = torch.arange(-1, 11)
    check_native(fn, x, n)                                  # broadcast, int64 degrees
    check_native(fn, x, 7)                                  # n_scalar
    check_native(fn, 0.25, n)                               # x_scalar
    check_native(fn, torch.tensor([[-2, 0, 3]]), torch.tensor([[4], [5]]))  # int64: float32
    check_native(fn, torch.tensor([True, False]), torch.tensor([3, 2]))
    check_native(lambda a, b: fn(a, b, out=torch.empty(5, 12, device=a.device)), x, n)


@pytest.mark.parametrize("dtype", [F32, F64], ids=dname)
def test_hermite_degree_limit(dtype):
    # NaN above degree 128 in float, 512 in double; the recurrence up to it.
    limit = 128 if dtype == F32 else 512
    x = torch.tensor([[-0.3], [0.02], [1e-3]], dtype=dtype)
    n = torch.tensor([limit - 1, limit, limit + 1], dtype=dtype)
    check_native(torch.special.hermite_polynomial_he, x, n, rtol=1e-4)
    check_native(torch.special.hermite_polynomial_h, x, n, rtol=1e-4)


def test_recurrence_stops_where_every_element_is_nan():
    # T_n(3) overflows to inf and then NaN within ~60 steps; the loop ends there as CPU's does,
    # not after a million steps.
    x, n = torch.tensor([3.0, -4.0]), torch.tensor([1e6, 1e6])
    start = time.time()
    check_native(torch.special.chebyshev_polynomial_t, x, n)
    check_native(torch.special.legendre_polynomial_p, x, n)
    assert time.time() - start < 60


def test_polynomial_compiles_into_one_program():
    import torch_pjrt.compile as tc

    def f(x, n):
        return torch.special.chebyshev_polynomial_t(x * 0.5, n) + torch.special.bessel_y1(x.abs() + 1)

    x, n = make((4, 6), F32, seed=7, low=-3, high=3), torch.randint(-1, 12, (4, 6))
    before = dict(tc.stats()["splits"])
    got = torch.compile(f, backend="tpu")(x.to(DEVICE), n.to(DEVICE))
    assert_same(got, f(x, n), rtol=2e-5, atol=1e-5)
    assert tc.stats()["splits"] == before, tc.stats()["split_reasons"]


# igamma's regions: the boundaries (a or x zero, infinite, negative, NaN), P's series, Q's series
# and continued fraction, and Temme's expansion for large a near x (20 < a < 200 within 30%,
# a > 200 within 4.5 / sqrt(a)).
IGAMMA_VALUES = [0.0, 1e-3, 0.1, 0.5, 0.9, 1.0, 1.05, 1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 19.0, 21.0,
                 25.0, 30.0, 50.0, 100.0, 150.0, 199.0, 201.0, 250.0, 1000.0, 1e4,
                 float("inf"), float("nan"), -1.0]


@pytest.mark.parametrize("dtype", [F32, F64, torch.bfloat16], ids=dname)
@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac], ids=lambda f: f.__name__)
def test_igamma_regions(fn, dtype):
    v = torch.tensor(IGAMMA_VALUES, dtype=F64)
    a, x = torch.meshgrid(v, v, indexing="ij")
    a = torch.cat([a.flatten(), make((300,), F64, seed=8, low=0, high=40), 220 + 30 * make((100,), F64, seed=9, low=0, high=1)])
    x = torch.cat([x.flatten(), make((300,), F64, seed=10, low=0, high=40), a[-100:] * (1 + 0.02 * make((100,), F64, seed=11, low=-1, high=1))])
    kw = {"rtol": 1e-5, "atol": 1e-6} if dtype == F32 else {"rtol": 1e-10, "atol": 1e-12} if dtype == F64 else {}
    check_native(fn, a.to(dtype), x.to(dtype), **kw)


def test_igamma_variants():
    a, x = make((3, 4), F32, seed=12, low=0.1, high=8), make((4,), F32, seed=13, low=0.1, high=8)
    check_native(torch.special.gammaincc, a, x, rtol=1e-5, atol=1e-6)
    check_native(lambda p, q: p.clone().igamma_(q), a, x, rtol=1e-5, atol=1e-6)
    check_native(lambda p, q: torch.igammac(p, q, out=torch.empty_like(p)), a, x, rtol=1e-5, atol=1e-6)
    # CPU has no integer kernel: the call falls back and CPU raises its own error
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.igamma(torch.ones(2, dtype=torch.int64, device=DEVICE), torch.ones(2, dtype=torch.int64, device=DEVICE))


SPECIAL_VALUES = torch.tensor([0.0, -0.0, 1.0, -1.0, -2.5, -0.5, 1e-3, 3.7, -3.7, 30.0,
                               float("inf"), -float("inf"), float("nan"), -8.4784, 12.5, 95.0])


UNARY_SPECIAL = {
    "sinc": torch.sinc,
    "entr": torch.special.entr,
    "i0": torch.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
    "erfcx": torch.special.erfcx,
    "log_ndtr": torch.special.log_ndtr,
    "digamma": torch.digamma,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
    "hardswish": torch.nn.functional.hardswish,
    "mish": torch.nn.functional.mish,
    "logsigmoid": torch.nn.functional.logsigmoid,
}


@pytest.mark.parametrize("op", list(UNARY_SPECIAL))
def test_unary_special_values(op):
    check_native(UNARY_SPECIAL[op], SPECIAL_VALUES, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=dname)
@pytest.mark.parametrize("op", list(UNARY_SPECIAL))
def test_unary_special_random(op, dtype):
    if dtype == BF16 and op in ("erfcx", "log_ndtr"):
        with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
            UNARY_SPECIAL[op](torch.ones(2, dtype=dtype, device=DEVICE))  # CPU's own error
        return
    kw = {"rtol": 2e-5, "atol": 1e-5} if dtype == F32 else {}
    check_native(UNARY_SPECIAL[op], make((4, 5), dtype, seed=1, low=-6, high=6), **kw)


@pytest.mark.parametrize("fn", [torch.sinc, torch.special.entr, torch.i0, torch.special.erfcx])
def test_float_result_of_integers(fn):
    check_native(fn, torch.tensor([[-3, 0, 2], [5, 1, -1]]))
    check_native(fn, torch.tensor([True, False]))


def test_ndtri():
    check_native(torch.special.ndtri, torch.tensor([0.0, 1e-3, 0.1, 0.5, 0.9, 0.999, 1.0, -0.5, 2.0]),
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n):
    # Negative non-integer x sums terms that cancel to a few digits in f32 (CPU's own float
    # kernel lands closer to the exact value than its precision promises): 1e-3 there.
    check_native(lambda x: torch.polygamma(n, x), SPECIAL_VALUES, rtol=1e-3, atol=1e-5)
    check_native(lambda x: x.clone().polygamma_(n), make((3, 4), F32, seed=n, low=0.1, high=5), rtol=1e-4)


def test_polygamma_backward_and_errors():
    x = make((3, 4), F32, seed=5, low=0.5, high=4)
    grads = []
    for dev in ("cpu", DEVICE):
        xd = x.detach().to(dev).requires_grad_()
        torch.polygamma(2, xd).sum().backward()
        grads.append(xd.grad)
    assert_same(grads[1], grads[0], rtol=1e-4)
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, x.to(DEVICE))


def test_zeta_rules():
    x = torch.tensor([1.0, 0.5, 2.0, 3.0, 2.0, 2.5, 4.0])
    q = torch.tensor([1.0, 1.0, 0.0, -2.5, -1.0, -2.5, 0.7])
    check_native(torch.special.zeta, x, q, rtol=1e-4)
    check_native(torch.special.zeta, torch.tensor([True, False]), torch.tensor([True, False]))
