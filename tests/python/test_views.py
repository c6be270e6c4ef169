"""Views are metadata over one storage: they read correctly, and a write through any view is seen
by the base and by every other view of the same storage."""
import pytest
import torch

from tpu_helpers import DEVICE, assert_same, make


def pair(shape=(4, 6), dtype=torch.float32):
    c = torch.arange(int(torch.tensor(shape).prod()), dtype=dtype).reshape(shape)
    return c, c.to(DEVICE)


VIEWS = {
    "view": lambda x: x.view(6, 4),
    "view_flat": lambda x: x.view(-1),
    "reshape_of_contiguous": lambda x: x.reshape(3, 8),
    "transpose": lambda x: x.transpose(0, 1),
    "t": lambda x: x.t(),
    "permute": lambda x: x.view(2, 2, 6).permute(2, 0, 1),
    "narrow": lambda x: x.narrow(1, 2, 3),
    "select_row": lambda x: x.select(0, 2),
    "select_col": lambda x: x.select(1, 3),
    "index_int": lambda x: x[3],
    "slice": lambda x: x[1:3],
    "slice_step": lambda x: x[:, 1::2],
    "slice_step_both": lambda x: x[::3, ::4],
    "negative_index": lambda x: x[-1, -2:],
    "expand": lambda x: x[:1].expand(3, 6),
    "expand_new_dim": lambda x: x[:, :1].unsqueeze(0).expand(2, 4, 5),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[:, 2:3].squeeze(1),
    "as_strided": lambda x: x.as_strided((3, 3), (1, 2), 1),
    "as_strided_overlapping": lambda x: x.as_strided((5, 4), (2, 3), 0),
    "diagonal": lambda x: x.diagonal(),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "chain": lambda x: x.t()[1:5:2].unsqueeze(0).transpose(0, 2)[1:],
    "view_dtype": lambda x: x.view(torch.int32),
    "view_dtype_narrow": lambda x: x[1:3].view(torch.int16),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_reads(name):
    c, t = pair()
    f = VIEWS[name]
    tv, cv = f(t), f(c)
    assert tv.shape == cv.shape
    assert tv.stride() == cv.stride()
    assert tv.storage_offset() == cv.storage_offset()
    assert tv.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert torch.equal(tv.cpu(), cv)


def test_views_do_not_copy_storage():
    _, t = pair()
    for name, f in VIEWS.items():
        assert f(t).untyped_storage().data_ptr() == t.untyped_storage().data_ptr(), name


def test_reshape_of_non_viewable_copies():
    c, t = pair()
    r = t.t().reshape(24)
    assert torch.equal(r.cpu(), c.t().reshape(24))
    assert r.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    r.add_(1)
    assert torch.equal(t.cpu(), c)


WRITES = {
    "slice_add_": lambda x: x[1:3].add_(1),
    "t_mul_": lambda x: x.t().mul_(2),
    "step_fill_": lambda x: x[:, ::2].fill_(0),
    "select_sub_": lambda x: x.select(1, 4).sub_(3),
    "diagonal_neg_": lambda x: x.diagonal().neg_(),
    "permute_div_": lambda x: x.view(2, 2, 6).permute(2, 0, 1)[1:4].div_(4),
    "as_strided_exp_": lambda x: x.as_strided((2, 3), (7, 2), 1).mul_(-1).exp_(),
    "narrow_tanh_": lambda x: x.narrow(0, 2, 2).tanh_(),
    "row_add_other_view": lambda x: x[0].add_(x[3]),
    "block_add_other_block": lambda x: x[:2, :3].add_(x[2:, 3:].t().t()),
    "col_copy_from_row": lambda x: x[:, 5].copy_(x[1, :4]),
    "reinterpret_int_add_": lambda x: x.view(torch.int32)[5:9].add_(1),
    "setitem_scalar": lambda x: x.__setitem__((slice(None), 1), 7.5),
    "setitem_tensor": lambda x: x.__setitem__((2, slice(1, 4)), torch.tensor([9., 8., 7.],
                                                                            device=x.device)),
    "out_into_view": lambda x: torch.mul(x[0], x[1], out=x[3]),
    "sum_out_into_view": lambda x: torch.sum(x[:2], 0, out=x[2]),
    "mm_out_into_view": lambda x: torch.mm(x[:2, :2], x[2:, :2], out=x[:2, 4:]),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_write_through_view_is_seen_everywhere(name):
    c, t = pair()
    # several views of the storage, created before the write
    views = [lambda x: x, lambda x: x.t(), lambda x: x.view(-1)[::5], lambda x: x[1:, 2:],
             lambda x: x.view(3, 8).select(1, 7), lambda x: x.view(torch.int32)]
    tv = [v(t) for v in views]
    if name == "setitem_tensor":
        WRITES[name](c.clone())  # sanity: the CPU form runs
    cw = c.clone()
    WRITES[name](cw)
    WRITES[name](t)
    for v, cur in zip(views, tv):
        assert torch.equal(cur.cpu(), v(cw)), name
    assert torch.equal(t.cpu(), cw)


def test_write_into_expanded_view_of_new_tensor_via_copy():
    # copying into a non-overlapping strided view is fine and exact
    t = torch.zeros(3, 8, device=DEVICE)
    t[:, ::2].copy_(torch.arange(12.).view(3, 4))
    ref = torch.zeros(3, 8)
    ref[:, ::2] = torch.arange(12.).view(3, 4)
    assert torch.equal(t.cpu(), ref)


@pytest.mark.parametrize("case", ["internal_overlap", "partial_overlap"])
def test_inplace_overlap_raises_like_cpu(case):
    def run(x):
        if case == "internal_overlap":
            x[:1].expand(3, 4).add_(1)
        else:
            x.view(-1)[1:].add_(x.view(-1)[:-1])

    with pytest.raises(RuntimeError, match="single memory location"):
        run(torch.zeros(3, 4))
    t = torch.zeros(3, 4, device=DEVICE)
    with pytest.raises(RuntimeError, match="memory location"):
        run(t)


def test_inplace_on_view_keeps_identity_and_metadata():
    _, t = pair()
    v = t[1:3, ::2]
    stride, offset = v.stride(), v.storage_offset()
    r = v.add_(1)
    assert r is v
    assert v.stride() == stride and v.storage_offset() == offset
    assert v._base is t


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int8, torch.int64, torch.float16,
                                   torch.bool], ids=str)
def test_strided_write_other_dtypes(dtype):
    c = make((5, 6), dtype, seed=3)
    t = c.to(DEVICE)
    if dtype == torch.bool:
        t[::2, 1::2].fill_(True)
        c[::2, 1::2].fill_(True)
    else:
        t[::2, 1::2].add_(1)
        c[::2, 1::2].add_(1)
    assert torch.equal(t.cpu(), c)
    assert torch.equal(t.t()[1::2].cpu(), c.t()[1::2])


def test_empty_then_fill():
    t = torch.empty(3, 4, device=DEVICE)
    assert t.shape == (3, 4) and t.is_tpu
    r = t.fill_(2.5)
    assert r is t
    assert torch.equal(t.cpu(), torch.full((3, 4), 2.5))
    e = torch.empty(5, dtype=torch.int16, device=DEVICE)
    e.fill_(-3)
    assert torch.equal(e.cpu(), torch.full((5,), -3, dtype=torch.int16))


def test_never_written_storage_reads_as_zeros():
    t = torch.empty(2, 5, device=DEVICE)
    assert torch.equal(t.cpu(), torch.zeros(2, 5))
    i = torch.empty(7, dtype=torch.int16, device=DEVICE)
    assert torch.equal(i[::2].cpu(), torch.zeros(4, dtype=torch.int16))
    # and ops can read it
    assert torch.equal((t + 1).cpu(), torch.ones(2, 5))


def test_partial_fill_of_empty_storage():
    t = torch.empty(6, device=DEVICE)
    t[::2].fill_(1.0)
    assert torch.equal(t[::2].cpu(), torch.ones(3))
    t[1::2].fill_(-1.0)
    assert torch.equal(t.cpu(), torch.tensor([1., -1., 1., -1., 1., -1.]))


def test_resize_keeps_old_contents():
    c = torch.arange(6.)
    t = c.to(DEVICE)
    t.resize_(10)
    assert t.shape == (10,)
    assert torch.equal(t[:6].cpu(), c)
    t[6:].fill_(0)
    assert torch.equal(t.cpu(), torch.cat([c, torch.zeros(4)]))
    t.resize_(2, 3)
    assert torch.equal(t.cpu(), c.view(2, 3))
    t.resize_(4, 5)
    assert torch.equal(t.view(-1)[:6].cpu(), c)


def test_resize_of_computed_tensor():
    t = torch.ones(4, device=DEVICE) * 3
    t.resize_(8)
    assert torch.equal(t[:4].cpu(), torch.full((4,), 3.))
    t.resize_(0)
    assert t.numel() == 0


def test_storage_resize_frees_and_reallocates_as_fsdp_does():
    # FSDP2 frees a parameter's memory with untyped_storage().resize_(0) and brings it back with
    # resize_(nbytes) before writing it again; the tensor keeps its shape throughout.
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    t = (torch.arange(256.) * 2).to(DEVICE)
    s = t.untyped_storage()
    assert torch.tpu.memory_allocated() - base >= 1024
    s.resize_(0)
    assert s.nbytes() == 0 and t.shape == (256,)
    assert torch.tpu.memory_allocated() == base
    s.resize_(1024)
    t.copy_(torch.arange(256.))
    assert_same(t, torch.arange(256.))
    s.resize_(512)  # shrinking keeps the prefix, growing the old contents
    s.resize_(2048)
    assert_same(t.view(-1)[:128], torch.arange(128.))


def test_set_shares_storage():
    a = torch.arange(6.).to(DEVICE)
    b = torch.empty(0, device=DEVICE)
    b.set_(a)
    assert b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert b.shape == a.shape
    b.add_(1)
    assert torch.equal(a.cpu(), torch.arange(6.) + 1)
    a[0].fill_(-5)
    assert b[0].item() == -5.0


def test_set_storage_offset_and_strides():
    a = torch.arange(6.).to(DEVICE)
    b = torch.empty(0, device=DEVICE)
    b.set_(a.untyped_storage(), 2, (2, 2), (1, 2))
    c = torch.arange(6.).as_strided((2, 2), (1, 2), 2)
    assert torch.equal(b.cpu(), c)
    b.mul_(10)
    ref = torch.arange(6.)
    ref.as_strided((2, 2), (1, 2), 2).mul_(10)
    assert torch.equal(a.cpu(), ref)


def test_contiguous_and_clone_of_views():
    c, t = pair()
    for f in (lambda x: x.t(), lambda x: x[:, 1::2], lambda x: x[:1].expand(3, 6)):
        tc = f(t).contiguous()
        assert tc.is_contiguous()
        assert torch.equal(tc.cpu(), f(c).contiguous())
        tcl = f(t).clone()
        assert torch.equal(tcl.cpu(), f(c))
        # the copy is independent of the storage
        tcl.add_(100)
        assert torch.equal(t.cpu(), c)


def test_ops_read_views_correctly():
    c = make((5, 7), torch.float32, seed=5)
    t = c.to(DEVICE)
    assert_same(t.t() @ t[:, ::2], c.t() @ c[:, ::2])
    assert_same(t[1:, 2:].sum(0), c[1:, 2:].sum(0))
    assert_same(t.diagonal().exp(), c.diagonal().exp())
    assert_same(t[:1].expand(5, 7) * t, c[:1].expand(5, 7) * c)
