"""Linear algebra against PyTorch on CPU, with no CPU fallback where the op is native: mm, addmm,
addbmm, linear, trace, cross; Cholesky and triangular solves; LU and QR factorizations and the ops
built on them (solve, inverse, det, slogdet, lu_solve, lu_unpack, geqrf, householder_product,
ormqr, qr), eigvalsh and svdvals. The factors follow LAPACK's pivot and reflector conventions, so
they match CPU's."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import (
    BF16, DEVICE, F32, F64, I32, I64, assert_same, both, check, check_native, dname, make, to_dev)


def mat(*shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


TOL = {F32: dict(rtol=1e-4, atol=1e-5), F64: dict(rtol=1e-10, atol=1e-12)}
DTYPES = [F32, F64]


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (2, 6, 3), (2, 3, 6), (1, 1), (2, 0, 0)])
def test_lu_factor_ex(dtype, shape):
    check_native(torch.linalg.lu_factor_ex, mat(*shape, dtype=dtype), **TOL[dtype])


def test_lu_factor_pivots_and_info():
    # Ties pick the first row; a zero column is a zero pivot reported in info (1-based).
    a = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 5.0, 1.0], [1.0, 0.5, 2.0]])
    check_native(torch.linalg.lu_factor_ex, a)
    singular = torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])
    check_native(torch.linalg.lu_factor_ex, singular)
    check_native(torch.linalg.lu_factor_ex, torch.stack([a, singular]))


@pytest.mark.parametrize("shape", [(5, 5), (2, 6, 4), (4, 6)])
def test_lu_and_unpack(shape):
    a = mat(*shape)
    check_native(torch.linalg.lu, a, **TOL[F32])
    lu, piv = torch.linalg.lu_factor(a)
    check_native(torch.lu_unpack, lu, piv, **TOL[F32])
    check_native(lambda x, p: torch.lu_unpack(x, p, unpack_data=False), lu, piv)
    check_native(lambda x, p: torch.lu_unpack(x, p, unpack_pivots=False), lu, piv)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(dtype, left, adjoint):
    a = mat(3, 4, 4, dtype=dtype)
    lu, piv = torch.linalg.lu_factor(a)
    b = mat(3, 4, 2, dtype=dtype, seed=1) if left else mat(3, 2, 4, dtype=dtype, seed=1)
    check_native(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint),
                 lu, piv, b, **TOL[dtype])
    # B broadcast against a single factorization.
    check_native(lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint),
                 lu[0], piv[0], b, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
def test_solve(dtype):
    a, b = mat(3, 4, 4, dtype=dtype), mat(3, 4, 2, dtype=dtype, seed=1)
    check_native(torch.linalg.solve, a, b, **TOL[dtype])
    check_native(torch.linalg.solve, a.mT, b, **TOL[dtype])  # not contiguous
    check_native(torch.linalg.solve, a, mat(3, 4, dtype=dtype, seed=2), **TOL[dtype])  # vectors
    check_native(torch.linalg.solve, a, mat(4, dtype=dtype, seed=2), **TOL[dtype])
    check_native(lambda x, y: torch.linalg.solve(x, y, left=False), a, b.mT, **TOL[dtype])
    check_native(torch.ops.aten._linalg_solve_ex, a, b, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
def test_inv_det_slogdet(dtype):
    a = mat(3, 5, 5, dtype=dtype)
    for x in (a, a.mT):  # CPU factors A^T for a contiguous A in det and slogdet
        check_native(torch.linalg.inv_ex, x, **TOL[dtype])
        check_native(torch.ops.aten._linalg_det, x, **TOL[dtype])
        check_native(torch.ops.aten._linalg_slogdet, x, **TOL[dtype])
        check_native(torch.logdet, x, **TOL[dtype])
    check_native(torch.linalg.det, torch.zeros(2, 0, 0, dtype=dtype))
    check_native(torch.linalg.det, torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=dtype))


def test_det_backward_native():
    a = mat(3, 4, 4)
    for x in (a, a.mT):
        xd = x.to(DEVICE).requires_grad_()
        xc = x.clone().requires_grad_()
        with torch_pjrt.strict():
            torch.linalg.det(xd).sum().backward()
            torch.linalg.slogdet(xd)[1].sum().backward()
        torch.linalg.det(xc).sum().backward()
        torch.linalg.slogdet(xc)[1].sum().backward()
        assert_same(xd.grad, xc.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (4, 4), (2, 1, 1)])
def test_qr(dtype, shape):
    a = mat(*shape, dtype=dtype)
    check_native(torch.geqrf, a, **TOL[dtype])
    for mode in ("reduced", "complete", "r"):
        check_native(lambda x: torch.linalg.qr(x, mode=mode), a, **TOL[dtype])


def test_qr_zero_column():
    # A zero column below the diagonal gives tau = 0 (the identity reflector), as in LAPACK.
    a = torch.tensor([[2.0, 1.0], [0.0, 3.0], [0.0, 4.0]])
    check_native(torch.geqrf, a)
    check_native(torch.linalg.qr, a)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_householder_product_and_ormqr(left, transpose):
    a, tau = torch.geqrf(mat(2, 5, 3))
    check_native(torch.linalg.householder_product, a, tau, **TOL[F32])
    check_native(torch.linalg.householder_product, a, tau[:, :2], **TOL[F32])
    c = mat(2, 5, 4, seed=1) if left else mat(2, 4, 5, seed=1)
    check_native(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose),
                 a, tau, c, **TOL[F32])


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh(dtype, uplo):
    a = mat(3, 6, 6, dtype=dtype)  # not symmetric: only the |uplo| triangle may be read
    check_native(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a, **TOL[dtype])
    check_native(torch.linalg.eigvalsh, mat(16, 16, dtype=dtype), **TOL[dtype])
    check_native(torch.linalg.eigvalsh, mat(2, 1, 1, dtype=dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 7), (5, 5), (2, 24, 16)])
def test_svdvals_and_rank(dtype, shape):
    a = mat(*shape, dtype=dtype)
    check_native(torch.linalg.svdvals, a, **TOL[dtype])
    check_native(lambda x: torch.linalg.matrix_norm(x, ord=2), a, **TOL[dtype])
    check_native(lambda x: torch.linalg.matrix_norm(x, ord="nuc"), a, **TOL[dtype])
    low_rank = a[..., :, :2] @ a[..., :2, :]
    check_native(torch.linalg.matrix_rank, low_rank)
    # Small singular values keep their relative accuracy (no Gram matrix).
    graded = mat(5, 5, dtype=dtype) * torch.tensor([1, 1e-2, 1e-4, 1e-5, 1], dtype=dtype)
    check_native(torch.linalg.svdvals, graded, **TOL[dtype])


def test_vectors_fall_back():
    # Eigenvectors and singular vectors are unique only up to sign: those calls run on CPU.
    a = mat(4, 4).to(DEVICE)
    before = dict(torch_pjrt.stats()["fallbacks"])
    w, _ = torch.linalg.eigh(a)
    _, s, _ = torch.linalg.svd(a)
    after = torch_pjrt.stats()["fallbacks"]
    assert after.get("_linalg_eigh", 0) > before.get("_linalg_eigh", 0)
    assert after.get("_linalg_svd", 0) > before.get("_linalg_svd", 0)
    assert_same(w, torch.linalg.eigh(a.cpu())[0], rtol=1e-4, atol=1e-5)
    assert_same(s, torch.linalg.svd(a.cpu())[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse(dtype, upper):
    a = mat(3, 5, 5, dtype=dtype)
    spd = a @ a.mT + 5 * torch.eye(5, dtype=dtype)
    factor = torch.linalg.cholesky(spd, upper=upper)
    check_native(lambda x: torch.cholesky_inverse(x, upper=upper), factor, **TOL[dtype])


def test_large_jacobi_orders_fall_back():
    # Past order 32, Jacobi's loop costs more than CPU's LAPACK: those run there, still correct.
    a = mat(40, 40)
    before = dict(torch_pjrt.stats()["fallbacks"])
    got = torch.linalg.svdvals(a.to(DEVICE))
    after = torch_pjrt.stats()["fallbacks"]
    assert after.get("_linalg_svd", 0) == before.get("_linalg_svd", 0) + 1
    assert_same(got, torch.linalg.svdvals(a), rtol=1e-4, atol=1e-5)
    check_native(torch.linalg.svdvals, mat(100, 32), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16, F64, I64, I32], ids=dname)
def test_mm(dtype):
    a = make((5, 7), dtype, seed=31, low=-3, high=3)
    b = make((7, 3), dtype, seed=32, low=-3, high=3)
    got, want = both(torch.mm, a, b)
    assert_same(got, want, **({"rtol": 2e-2, "atol": 1e-1} if dtype == BF16 else {}))
    assert_same(to_dev(a) @ to_dev(b), a @ b,
                **({"rtol": 2e-2, "atol": 1e-1} if dtype == BF16 else {}))


def test_mm_noncontiguous_and_out():
    a = make((7, 5), F32, seed=33)
    b = make((3, 7), F32, seed=34)
    ta, tb = to_dev(a, b)
    assert_same(ta.t() @ tb.t(), a.t() @ b.t())
    assert_same(ta[::2].t() @ ta[::2], a[::2].t() @ a[::2])
    out = torch.empty(5, 3, device=DEVICE)
    assert torch.mm(ta.t(), tb.t(), out=out) is out
    assert_same(out, a.t() @ b.t())


def test_mm_degenerate_shapes():
    check(torch.mm, torch.empty(2, 0), torch.empty(0, 3))
    check(torch.mm, torch.ones(1, 1), torch.full((1, 1), 3.0))
    check(torch.mm, make((0, 4), F32), make((4, 2), F32))


def test_mm_larger_float32():
    a = make((64, 128), F32, seed=35)
    b = make((128, 32), F32, seed=36)
    check(torch.mm, a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bias_shape", [(4, 3), (3,), (1, 3), (4, 1), ()], ids=str)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (2, 0)], ids=str)
def test_addmm(bias_shape, beta, alpha):
    bias = make(bias_shape, F32, seed=37)
    m1 = make((4, 5), F32, seed=38)
    m2 = make((5, 3), F32, seed=39)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=beta, alpha=alpha), bias, m1, m2)


def test_addmm_beta_zero_ignores_nan_self():
    bias = torch.full((2, 2), float("nan"))
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0), bias, torch.ones(2, 3), torch.ones(3, 2))


def test_addmm_inplace_out_and_types():
    bias = make((4, 3), F32, seed=40)
    m1 = make((4, 5), F32, seed=41)
    m2 = make((5, 3), F32, seed=42)
    tb, t1, t2 = to_dev(bias, m1, m2)
    assert tb.addmm_(t1, t2, beta=2, alpha=3) is tb
    assert_same(tb, bias.clone().addmm_(m1, m2, beta=2, alpha=3))
    out = torch.empty(4, 3, device=DEVICE)
    assert torch.addmm(to_dev(bias), t1, t2, out=out) is out
    assert_same(out, torch.addmm(bias, m1, m2))
    check(lambda s, x, y: torch.addmm(s, x, y, beta=2, alpha=3),
          make((2, 2), I64, seed=43), make((2, 3), I64, seed=44), make((3, 2), I64, seed=45))
    check(torch.addmm, make((3,), BF16, seed=46), make((2, 4), BF16, seed=47),
          make((4, 3), BF16, seed=48), rtol=2e-2, atol=1e-1)


def test_linear_layer_matches_cpu():
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 4)
    x = make((3, 6), F32, seed=49)
    want = lin(x).detach()
    lin.to(DEVICE)
    assert_same(lin(x.to(DEVICE)).detach(), want)


def test_mm_errors():
    a = torch.ones(3, 4, device=DEVICE)
    with pytest.raises((RuntimeError, ValueError), match="cannot be multiplied"):
        torch.mm(a, a)
    with pytest.raises((RuntimeError, ValueError), match="dtype"):
        torch.mm(a, torch.ones(4, 2, dtype=F64, device=DEVICE))
    with pytest.raises((RuntimeError, ValueError)):
        torch.mm(torch.ones(4, device=DEVICE), a)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_triangular_solves_native(upper):
    torch.manual_seed(0)
    a = torch.randn(3, 4, 4, dtype=torch.float64)
    a = a @ a.mT + 4 * torch.eye(4, dtype=torch.float64)
    b = torch.randn(3, 4, 2, dtype=torch.float64)
    with torch_pjrt.strict():
        lt, info = torch.linalg.cholesky_ex(a.to(DEVICE), upper=upper)
        xt = torch.linalg.solve_triangular(lt, b.to(DEVICE), upper=upper)
        st = torch.cholesky_solve(b.to(DEVICE), lt, upper=upper)
    l = torch.linalg.cholesky(a, upper=upper)
    assert_same(lt, l, atol=1e-12, rtol=1e-10)
    assert info.cpu().tolist() == [0, 0, 0]
    assert_same(xt, torch.linalg.solve_triangular(l, b, upper=upper), atol=1e-12, rtol=1e-10)
    assert_same(st, torch.cholesky_solve(b, l, upper=upper), atol=1e-12, rtol=1e-10)


def test_cholesky_of_a_non_positive_definite_matrix_raises():
    a = torch.eye(3)
    a[2, 2] = -1.0
    assert torch.linalg.cholesky_ex(a.to(DEVICE)).info.item() != 0
    with pytest.raises(torch.linalg.LinAlgError, match="positive-definite"):
        torch.linalg.cholesky(a.to(DEVICE))


def test_trace():
    check_native(torch.trace, make((3, 5), F32, seed=18))
    check_native(torch.trace, make((4, 2), I64, seed=19))


@pytest.mark.parametrize("dtype", [F32, BF16, I64], ids=dname)
def test_linalg_cross(dtype):
    a = make((4, 3, 2), dtype, seed=28)
    b = make((1, 3, 2), dtype, seed=29)
    check_native(lambda x, y: torch.linalg.cross(x, y, dim=1), a, b)
    with pytest.raises(RuntimeError, match="must have length 3"):
        torch.linalg.cross(a.to(DEVICE), b.to(DEVICE), dim=2)


def test_addbmm():
    s, b1, b2 = make((3, 4), F32, seed=31), make((5, 3, 2), F32, seed=32), make((5, 2, 4), F32, seed=33)
    check_native(lambda a, x, y: torch.addbmm(a, x, y, beta=0.5, alpha=2), s, b1, b2)
    check_native(lambda a, x, y: a.clone().addbmm_(x, y), s, b1, b2)


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_and_pdist_run_natively_with_cpus_gradient_at_zero_distance(p):
    # _cdist_forward/_pdist_forward and their backwards fell back to CPU; they are CPU's formulas
    # in device ops, including a gradient of 0 where two rows coincide (not sqrt's NaN).
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 4, 3, generator=g), torch.randn(2, 5, 3, generator=g)
    b[0, 0] = a[0, 0]
    rows = torch.randn(6, 3, generator=g)
    rows[4] = rows[1]
    for fn, xs in ((lambda x, y: torch.cdist(x, y, p=p, compute_mode="donot_use_mm_for_euclid_dist"), (a, b)),
                   (lambda x: torch.nn.functional.pdist(x, p=p), (rows,))):
        ref_in = [x.clone().requires_grad_() for x in xs]
        ref = fn(*ref_in)
        grad = torch.randn(ref.shape, generator=g)
        ref.backward(grad)
        dev_in = [x.to(DEVICE).requires_grad_() for x in xs]
        with torch_pjrt.strict():
            out = fn(*dev_in)
            out.backward(grad.to(DEVICE))
        assert_same(out, ref, atol=1e-5, rtol=1e-5)
        for d, r in zip(dev_in, ref_in):
            assert not d.grad.cpu().isnan().any()
            assert_same(d.grad, r.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_matrix_exp_runs_natively(dtype):
    # linalg_matrix_exp fell back to CPU: scaling and squaring with a degree-18 Taylor
    # polynomial, each matrix of a batch scaled by its own norm; its gradient (PyTorch's formula
    # through matrix_exp of a block matrix) runs natively too.
    g = torch.Generator().manual_seed(4)
    a = torch.randn(4, 5, 5, generator=g, dtype=dtype) * torch.tensor([0.01, 1.0, 6.0, 25.0],
                                                                       dtype=dtype)[:, None, None]
    grad = torch.randn(a.shape, generator=g, dtype=dtype)
    x = a.clone().requires_grad_()
    want = torch.linalg.matrix_exp(x)
    (want_grad,) = torch.autograd.grad(want, x, grad)
    xd = a.to(DEVICE).requires_grad_()
    with torch_pjrt.strict():
        got = torch.linalg.matrix_exp(xd)
        (got_grad,) = torch.autograd.grad(got, xd, grad.to(DEVICE))
    eps = 1e-5 if dtype == torch.float32 else 1e-12  # the largest norm amplifies rounding
    for d, w in ((got, want), (got_grad, want_grad)):
        scale = w.abs().amax((-2, -1), keepdim=True)  # relative to each matrix's largest entry
        assert ((d.cpu() - w).abs() / scale).max() < eps
