"""Host<->device and device<->device copies: every supported dtype, contiguous and strided
sources and destinations, conversions, partial-region copies, empty / 0-dim / bool tensors."""
import pytest
import torch

from tpu_helpers import ALL_DTYPES, DEVICE, assert_same, make

DT_IDS = [str(d).replace("torch.", "") for d in ALL_DTYPES]


def _src(dtype, shape=(4, 6), seed=0):
    # Values stay in range of every dtype so conversions between them are well defined.
    return make(shape, dtype, seed=seed, low=0.0 if dtype == torch.uint8 else -5.0, high=5.0)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
def test_round_trip_contiguous(dtype):
    c = _src(dtype)
    t = c.to(DEVICE)
    assert t.is_tpu and t.dtype == dtype and t.shape == c.shape
    back = t.cpu()
    assert back.device.type == "cpu" and back.dtype == dtype
    assert torch.equal(back, c)
    # the host copy is independent of the device tensor
    assert back.data_ptr() != c.data_ptr()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("kind", ["transposed", "step_slice", "expanded", "offset_permuted"])
def test_round_trip_noncontiguous_host_source(dtype, kind):
    c = _src(dtype, (4, 6, 2))
    if kind == "transposed":
        src = c[:, :, 0].t()
    elif kind == "step_slice":
        src = c[1:, ::3, 1]
    elif kind == "expanded":
        src = c[:1, :, :1].expand(5, 6, 3)
    else:
        src = c[1:3].permute(2, 0, 1)
    assert not src.is_contiguous()
    t = src.to(DEVICE)
    assert t.shape == src.shape
    assert torch.equal(t.cpu(), src)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("kind", ["transposed", "step_slice", "expanded", "offset_permuted"])
def test_round_trip_noncontiguous_device_source(dtype, kind):
    c = _src(dtype, (4, 6, 2))
    t = c.to(DEVICE)
    if kind == "transposed":
        pick = lambda x: x[:, :, 0].t()  # noqa: E731
    elif kind == "step_slice":
        pick = lambda x: x[1:, ::3, 1]  # noqa: E731
    elif kind == "expanded":
        pick = lambda x: x[:1, :, :1].expand(5, 6, 3)  # noqa: E731
    else:
        pick = lambda x: x[1:3].permute(2, 0, 1)  # noqa: E731
    assert not pick(t).is_contiguous()
    assert torch.equal(pick(t).cpu(), pick(c))
    # and a device-side contiguous() of the view
    assert torch.equal(pick(t).contiguous().cpu(), pick(c).contiguous())


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
def test_host_to_device_into_noncontiguous_destination(dtype):
    c = _src(dtype)
    dst = torch.zeros(6, 4, dtype=dtype, device=DEVICE)
    dst.t().copy_(c)
    assert torch.equal(dst.cpu(), c.t())


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
def test_device_to_host_into_noncontiguous_destination(dtype):
    c = _src(dtype)
    t = c.to(DEVICE)
    dst = torch.zeros(6, 4, dtype=dtype)
    dst.t().copy_(t)
    assert torch.equal(dst, c.t())
    host_region = torch.zeros(8, 12, dtype=dtype)
    host_region[::2, ::2].copy_(t)
    ref = torch.zeros(8, 12, dtype=dtype)
    ref[::2, ::2] = c
    assert torch.equal(host_region, ref)


@pytest.mark.parametrize("src_dtype", ALL_DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("dst_dtype", [torch.bool, torch.uint8, torch.int32, torch.int64,
                                       torch.float16, torch.bfloat16, torch.float32,
                                       torch.float64],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_device_to_device_copy_with_conversion(src_dtype, dst_dtype):
    c = _src(src_dtype)
    if dst_dtype == torch.uint8 and src_dtype.is_signed:
        c = c.abs()  # negative -> uint8 is undefined behaviour in PyTorch
    t = c.to(DEVICE)
    dst = torch.empty(4, 6, dtype=dst_dtype, device=DEVICE)
    ret = dst.copy_(t)
    assert ret is dst
    ref = torch.empty(4, 6, dtype=dst_dtype).copy_(c)
    assert_same(dst, ref)
    # Tensor.to(dtype) on device agrees too, also from a strided view
    assert_same(t.t().to(dst_dtype), c.t().to(dst_dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool,
                                   torch.int8],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_copy_into_view_changes_only_that_region(dtype):
    base_c = _src(dtype, (6, 8), seed=1)
    src_c = _src(dtype, (4, 3), seed=2)
    base = base_c.to(DEVICE)
    # device source
    base[1:5, 2:8:2].copy_(src_c.to(DEVICE))
    ref = base_c.clone()
    ref[1:5, 2:8:2] = src_c
    assert torch.equal(base.cpu(), ref)
    # host source into a transposed region
    base2 = base_c.to(DEVICE)
    base2[2:5, 1:5].t().copy_(src_c)
    ref2 = base_c.clone()
    ref2[2:5, 1:5].t().copy_(src_c)
    assert torch.equal(base2.cpu(), ref2)


def test_copy_into_region_with_conversion():
    base = torch.zeros(5, 5, dtype=torch.float64, device=DEVICE)
    src = torch.arange(9, dtype=torch.int32).reshape(3, 3)
    base[1:4, 1:4].copy_(src.to(DEVICE))
    ref = torch.zeros(5, 5, dtype=torch.float64)
    ref[1:4, 1:4] = src.double()
    assert torch.equal(base.cpu(), ref)


def test_copy_broadcasts_source():
    dst = torch.zeros(3, 4, device=DEVICE)
    dst.copy_(torch.arange(4.))
    assert torch.equal(dst.cpu(), torch.arange(4.).expand(3, 4))
    dst2 = torch.zeros(3, 4, dtype=torch.int64, device=DEVICE)
    dst2.copy_(torch.arange(3.).view(3, 1).to(DEVICE))
    assert torch.equal(dst2.cpu(), torch.arange(3).view(3, 1).expand(3, 4))
    dst3 = torch.zeros(3, device=DEVICE)
    dst3.copy_(torch.tensor(5.))
    assert torch.equal(dst3.cpu(), torch.full((3,), 5.))


def test_copy_source_shape_mismatch_raises():
    # CPU raises RuntimeError; the backend reports argument errors as ValueError.
    with pytest.raises((RuntimeError, ValueError), match="size"):
        torch.zeros(3, 4, device=DEVICE).copy_(torch.ones(5, device=DEVICE))
    with pytest.raises((RuntimeError, ValueError), match="size|shape"):
        torch.zeros(3, 4, device=DEVICE).copy_(torch.ones(5))
    # the device is still fine
    assert torch.zeros(3, 4, device=DEVICE).copy_(torch.ones(4)).sum().item() == 12.0


def test_device_copies_are_independent():
    a = torch.ones(3, device=DEVICE)
    b = torch.zeros(3, device=DEVICE)
    b.copy_(a)
    a.add_(1)
    assert torch.equal(b.cpu(), torch.ones(3))
    c = a.clone()
    a.mul_(10)
    assert torch.equal(c.cpu(), torch.full((3,), 2.))
    assert c.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.uint8, torch.bool],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_to_device_with_dtype(dtype):
    c = _src(torch.float32, (3, 5))
    if dtype == torch.uint8:
        c = c.abs()
    t = c.to("tpu", dtype=dtype)
    assert t.is_tpu and t.dtype == dtype
    assert torch.equal(t.cpu(), c.to(dtype))
    t2 = c.t().to(device="tpu", dtype=dtype)
    assert torch.equal(t2.cpu(), c.t().to(dtype))
    # .to() to the same device and dtype returns self
    assert t.to("tpu") is t
    assert t.to(dtype) is t


def test_to_cpu_with_dtype_and_non_blocking():
    c = _src(torch.float32, (3, 5))
    t = c.to("tpu", non_blocking=True)
    assert torch.equal(t.to("cpu", dtype=torch.float64), c.double())
    assert torch.equal(t.to("cpu", non_blocking=True), c)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
def test_item(dtype):
    c = _src(dtype, (3, 4))
    t = c.to(DEVICE)
    assert t[1, 2].item() == c[1, 2].item()
    assert type(t[1, 2].item()) is type(c[1, 2].item())
    assert t[2:3, 3:4].item() == c[2, 3].item()
    assert t.t()[3, 2].item() == c[2, 3].item()


def test_item_of_computed_value_and_multi_element_error():
    t = torch.tensor([1.5, 2.5], device=DEVICE)
    assert (t * 2).sum().item() == 8.0
    with pytest.raises(RuntimeError, match="2 elements"):
        t.item()
    assert t[0].item() == 1.5


def test_tolist_and_numpy():
    c = _src(torch.float32, (2, 3))
    t = c.to(DEVICE)
    assert t.tolist() == c.tolist()
    assert (t.cpu().numpy() == c.numpy()).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 2, 5)], ids=str)
def test_empty_tensors(dtype, shape):
    c = torch.empty(shape, dtype=dtype)
    t = c.to(DEVICE)
    assert t.shape == c.shape and t.numel() == 0 and t.dtype == dtype
    back = t.cpu()
    assert back.shape == c.shape and back.dtype == dtype
    t2 = torch.empty(shape, dtype=dtype, device=DEVICE)
    t2.copy_(c)
    assert t2.cpu().shape == c.shape
    assert torch.equal(t2.to(torch.float32).cpu(), torch.empty(shape))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=DT_IDS)
def test_zero_dim_tensors(dtype):
    c = _src(dtype, ())
    assert c.dim() == 0
    t = c.to(DEVICE)
    assert t.dim() == 0 and t.shape == torch.Size([])
    assert torch.equal(t.cpu(), c)
    assert t.item() == c.item()
    t2 = torch.tensor(c.item(), dtype=dtype, device=DEVICE)
    assert torch.equal(t2.cpu(), c)


def test_bool_tensors():
    c = torch.tensor([[True, False, True], [False, False, True]])
    t = c.to(DEVICE)
    assert t.dtype == torch.bool
    assert torch.equal(t.cpu(), c)
    assert torch.equal(t.t().cpu(), c.t())
    assert torch.equal(t.to(torch.int64).cpu(), c.long())
    assert torch.equal(t.to(torch.float32).cpu(), c.float())
    nums = torch.tensor([0., -2., 0.5, 0.])
    assert torch.equal(nums.to(DEVICE).to(torch.bool).cpu(), nums.bool())
    assert t[0, 0].item() is True and t[0, 1].item() is False
    f = torch.zeros(4, dtype=torch.bool, device=DEVICE)
    f[1::2].copy_(torch.tensor([True, True]))
    assert torch.equal(f.cpu(), torch.tensor([False, True, False, True]))


def test_large_round_trip():
    c = torch.arange(1_000_003, dtype=torch.float32)
    t = c.to(DEVICE)
    assert torch.equal(t.cpu(), c)
    assert torch.equal(t[999_990::3].cpu(), c[999_990::3])


# complex64/complex128 tensors are device types, stored as their interleaved float parts (other
# complex types are stored as bytes, their ops falling back to CPU). Every copy must work.
CDT_IDS = ["cfloat", "cdouble"]


@pytest.mark.parametrize("dtype", [torch.cfloat, torch.cdouble], ids=CDT_IDS)
def test_complex_round_trip_strided(dtype):
    c = torch.randn(4, 6, 3, dtype=dtype, generator=torch.Generator().manual_seed(0))
    t = c.to(DEVICE)
    assert t.dtype == dtype and torch.equal(t.cpu(), c)
    for view in (lambda x: x[:, ::2], lambda x: x.transpose(0, 2), lambda x: x[1:, 2, ::2],
                 lambda x: x[:1].expand(3, 6, 3)):
        assert torch.equal(view(t).cpu(), view(c))
        assert torch.equal(view(t).contiguous().cpu(), view(c).contiguous())
    assert t[1, 2, 0].item() == c[1, 2, 0].item()


def test_complex_conversions_on_device():
    f = make((4, 6), torch.float32)
    c = f.to(DEVICE).to(torch.cfloat)
    assert c.device.type == DEVICE and torch.equal(c.cpu(), f.to(torch.cfloat))
    z = torch.randn(4, 6, dtype=torch.cfloat, generator=torch.Generator().manual_seed(1))
    assert torch.equal(z.to(DEVICE).to(torch.float32).cpu(), z.real)
    assert torch.equal(z.to(DEVICE).to(torch.cdouble).cpu(), z.to(torch.cdouble))
    assert torch.equal(z.to(DEVICE).expand(2, 4, 6).clone().cpu(), z.expand(2, 4, 6))


def test_complex_copy_into_strided_destination_keeps_the_rest():
    z = torch.randn(4, 6, dtype=torch.cfloat, generator=torch.Generator().manual_seed(2))
    t = torch.zeros(4, 6, dtype=torch.cfloat, device=DEVICE)
    e = torch.zeros(4, 6, dtype=torch.cfloat)
    t[:, 1::2] = z[:, :3]           # from the host
    e[:, 1::2] = z[:, :3]
    t[:, ::2] = z.to(DEVICE)[:, 3:]  # device to device, strided on both sides
    e[:, ::2] = z[:, 3:]
    assert torch.equal(t.cpu(), e)


def test_complex_conjugate_and_fft_results():
    x = make((5, 6, 7), torch.float32)
    # ifft's CPU result comes back with a lazy conjugate bit and a transposed layout
    for fn in (lambda v: torch.fft.ifft(v, n=10, dim=1, norm="ortho"), torch.fft.fft, torch.fft.ihfft):
        torch.testing.assert_close(fn(x.to(DEVICE)).cpu(), fn(x))
    z = torch.randn(3, 4, dtype=torch.cfloat, generator=torch.Generator().manual_seed(3))
    assert torch.equal(z.to(DEVICE).conj().cpu(), z.conj())
    assert torch.equal(z.to(DEVICE).conj().resolve_conj().cpu(), z.conj().resolve_conj())


def test_complex_real_views_alias_their_storage():
    z = torch.randn(3, 4, dtype=torch.cfloat, generator=torch.Generator().manual_seed(4))
    t = z.to(DEVICE)
    r = torch.view_as_real(t)
    assert r.dtype == torch.float32 and r.stride() == (8, 2, 1)
    assert torch.equal(r.cpu(), torch.view_as_real(z)) and torch.equal((r * 2).cpu(), torch.view_as_real(z) * 2)
    r[:, :, 0] = 7.0  # a write through the real view changes the complex tensor
    e = z.clone()
    torch.view_as_real(e)[:, :, 0] = 7.0
    assert torch.equal(t.cpu(), e)
    f = make((3, 4, 2), torch.float32)
    ft = f.to(DEVICE)
    c = torch.view_as_complex(ft)
    assert torch.equal(c.cpu(), torch.view_as_complex(f))
    c.mul_(2)  # a complex op on the float storage: the real view sees it
    assert torch.equal(ft.cpu(), f * 2)


# ---------------------------------------------------------------- pinned host memory

def test_pin_memory_is_real_and_non_blocking_copies_from_it_arrive():
    x = make((512, 64), torch.float32, seed=5)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p.device.type == "cpu"
    assert torch.equal(p, x)
    t = p.to("tpu", non_blocking=True)
    u = p.to("tpu", non_blocking=True)
    del p  # freeing the pinned source waits for the copies still reading it
    assert_same(t * 2, x * 2)
    assert_same(u, x)
    # a strided or converting copy from pinned memory still works (through a contiguous copy)
    q = x.t().contiguous().pin_memory().t()
    assert_same(q.to("tpu", torch.float64, non_blocking=True), x.double())


def test_dataloader_pin_memory_gives_pinned_batches():
    ds = torch.utils.data.TensorDataset(torch.arange(32.).reshape(16, 2))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True))
    assert all(b.is_pinned() for (b,) in batches)
    sums = [b.to(DEVICE, non_blocking=True).sum().item() for (b,) in batches]
    assert sums == [28.0, 92.0, 156.0, 220.0]
