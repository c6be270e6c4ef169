"""LU and QR factorizations and the ops built on them (solve, inverse, det, slogdet, lu_solve,
lu_unpack, geqrf, householder_product, ormqr, qr), against PyTorch on CPU, with no CPU
fallback: the factors follow LAPACK's pivot and reflector conventions, so they match CPU's."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same

F32, F64 = torch.float32, torch.float64


def dname(d):
    return str(d).replace("torch.", "")


def mat(*shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def check_native(fn, *cpu_args, **kw):
    dev = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    with torch_pjrt.strict():
        got = fn(*dev)
        torch.tpu.synchronize()
    want = fn(*cpu_args)
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w.dtype == torch.int32:
            assert g.dtype == torch.int32
            assert torch.equal(g.cpu(), w)
        else:
            assert_same(g, w, **kw)


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
