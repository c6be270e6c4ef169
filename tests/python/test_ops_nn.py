"""Neural-net ops and modules against CPU: dropout backward of integer gradients, gradients through
composite ops, the transformer encoder layer's and multi-head attention's eval fast paths, masked
softmax, and the kernel scaled_dot_product_attention picks."""
import pytest
import torch

import torch_pjrt
from tpu_helpers import DEVICE, assert_same, make


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.bfloat16], ids=["int64", "bool", "bf16"])
def test_native_dropout_backward_promotes_like_cpu(dtype):
    g = make((4, 5), dtype)
    mask = make((4, 5), torch.bool, seed=1)
    expected = torch.ops.aten.native_dropout_backward(g, mask, 1.3)
    assert_same(torch.ops.aten.native_dropout_backward(g.to(DEVICE), mask.to(DEVICE), 1.3), expected)


def test_gradient_flows_through_composite_ops():
    # where.ScalarOther is a composite: a tpu kernel for it made logdet's gradient silently None
    c = torch.tensor([[1.5, 0.2], [0.3, 2.0]])
    x = c.to(DEVICE).requires_grad_()
    torch.logdet(x).backward()
    xc = c.clone().requires_grad_()
    torch.logdet(xc).backward()
    assert x.grad is not None
    assert_same(x.grad, xc.grad)
    y = c.to(DEVICE).requires_grad_()
    torch.where(y > 1, y, 0.0).sum().backward()
    assert_same(y.grad, (c > 1).float())


# ----------------------------------------------------------------- transformer eval fast paths
# nn.TransformerEncoderLayer and nn.MultiheadAttention in eval/no_grad call fused kernels
# (_transformer_encoder_layer_fwd, _native_multi_head_attention) that have CPU kernels only;
# on tpu they run as the same computation in native ops, under strict mode (no fallback).

@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_fast_path(norm_first, activation):
    import copy
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                             norm_first=norm_first, activation=activation).eval()
    tpu_layer = copy.deepcopy(layer).to(DEVICE)
    x = torch.randn(2, 7, 32)
    masks = [{}, {"src_key_padding_mask": torch.tensor([[False] * 7, [False] * 5 + [True] * 2])},
             {"src_mask": torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)}]
    with torch.no_grad(), torch_pjrt.strict():
        for kw in masks:
            expected = layer(x, **kw)
            actual = tpu_layer(x.to(DEVICE), **{k: v.to(DEVICE) for k, v in kw.items()})
            assert_same(actual, expected, atol=1e-5, rtol=1e-5)
        # the fused op itself, so that the test fails if the module stops taking the fast path
        args = (x, 32, 4, layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias,
                layer.self_attn.out_proj.weight, layer.self_attn.out_proj.bias,
                activation == "gelu", norm_first, 1e-5, layer.norm1.weight, layer.norm1.bias,
                layer.norm2.weight, layer.norm2.bias, layer.linear1.weight, layer.linear1.bias,
                layer.linear2.weight, layer.linear2.bias)
        assert_same(torch._transformer_encoder_layer_fwd(*[a.to(DEVICE) if torch.is_tensor(a) else a for a in args]),
                    torch._transformer_encoder_layer_fwd(*args), atol=1e-5, rtol=1e-5)


def test_transformer_encoder_padding_mask_nested_path():
    # nn.TransformerEncoder in eval with a padding mask packs the batch into a nested tensor (tpu
    # is in its list of fast-path devices, as CUDA is) and unpacks it with zeros at the padding.
    # Nested tensors on tpu work; their ops run on CPU, counted under "op (nested)".
    import copy
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    tpu_enc = copy.deepcopy(enc).to(DEVICE)
    x = torch.randn(3, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    torch_pjrt.reset_stats()
    with torch.no_grad():
        expected = enc(x, src_key_padding_mask=mask)
        actual = tpu_enc(x.to(DEVICE), src_key_padding_mask=mask.to(DEVICE))
    assert_same(actual, expected, atol=1e-5, rtol=1e-5)
    assert (actual.cpu()[1, 3:] == 0).all()  # the nested path ran: padding comes back as zeros
    assert "to_padded_tensor (nested)" in torch_pjrt.stats()["fallbacks"]
    nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)]).to(DEVICE)
    assert nested.is_nested and nested.device.type == DEVICE
    assert_same(nested.to_padded_tensor(0.0), nested.cpu().to_padded_tensor(0.0))


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("cross", [False, True])
def test_multihead_attention_fast_path(need_weights, cross):
    import copy
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    tpu_mha = copy.deepcopy(mha).to(DEVICE)
    q = torch.randn(2, 5, 16)
    kv = torch.randn(2, 6, 16) if cross else q
    with torch.no_grad(), torch_pjrt.strict():
        for kw in ({}, {"key_padding_mask": torch.tensor([[False] * kv.shape[1], [False] * 3 + [True] * (kv.shape[1] - 3)])}):
            out, w = mha(q, kv, kv, need_weights=need_weights, **kw)
            q_t = q.to(DEVICE)
            kv_t = q_t if not cross else kv.to(DEVICE)
            tout, tw = tpu_mha(q_t, kv_t, kv_t, need_weights=need_weights,
                               **{k: v.to(DEVICE) for k, v in kw.items()})
            assert_same(tout, out, atol=1e-5, rtol=1e-5)
            if w is None:
                assert tw is None
            else:
                assert_same(tw, w, atol=1e-5, rtol=1e-5)


def test_masked_softmax():
    x = make((2, 2, 3, 3), torch.float32)
    mask = torch.tensor([[True, True, True], [False, True, False], [False, False, False]])
    pad = torch.tensor([[False, False, True], [True, False, False]])
    with torch_pjrt.strict():
        for m, mask_type in ((mask, 0), (pad, 1)):
            assert_same(torch._masked_softmax(x.to(DEVICE), m.to(DEVICE), 3, mask_type),
                        torch._masked_softmax(x, m, 3, mask_type), equal_nan=True)


def _qkv(dtype, shape=(2, 3, 5, 8)):
    g = torch.Generator().manual_seed(3)
    return [torch.randn(shape, generator=g).to(dtype).requires_grad_() for _ in range(3)]


def _grad_fn_names(t):
    names, todo = set(), [t.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is not None and type(fn).__name__ not in names:
            names.add(type(fn).__name__)
            todo += [f for f, _ in fn.next_functions]
    return names


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_sdpa_runs_the_efficient_kernel_as_cuda_does(dtype, mask, compiled):
    # Without a kernel choice for tpu, SDPA took its math path, which DTensor cannot run with a
    # mask (found with PyTorch's own tensor-parallel Transformer). As on CUDA it now runs the
    # memory-efficient kernel, forward and backward, with a row masked entirely giving zeros.
    import torch.nn.functional as F
    q, k, v = _qkv(dtype)
    m = None
    if mask == "bool":
        m = torch.rand(5, 5, generator=torch.Generator().manual_seed(4)) > 0.4
        m[1] = False
    elif mask == "float":
        m = torch.randn(2, 1, 5, 5, generator=torch.Generator().manual_seed(4)).to(dtype)
    causal = mask == "causal"
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
    ref.sum().backward()
    tq, tk, tv = (t.detach().to(DEVICE).requires_grad_() for t in (q, k, v))
    tm = None if m is None else m.to(DEVICE)
    fn = F.scaled_dot_product_attention
    if compiled:
        fn = torch.compile(fn, backend="tpu", dynamic=False)
    with torch_pjrt.strict():
        out = fn(tq, tk, tv, attn_mask=tm, is_causal=causal)
        out.sum().backward()
    if not compiled:
        assert "ScaledDotProductEfficientAttentionBackward0" in _grad_fn_names(out)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    assert_same(out, ref, **tol)
    for a, b in zip((tq, tk, tv), (q, k, v)):
        assert_same(a.grad, b.grad, **tol)


def test_sdpa_keeps_the_math_path_where_the_kernel_does_not_apply():
    # Grouped key/value heads and a user's sdpa_kernel(MATH) keep the math path; the kernel,
    # called directly, returns the log-sum-exp of each row's scores, padded to a multiple of 32
    # as CUDA's.
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (t.detach().to(DEVICE).requires_grad_() for t in _qkv(torch.float32))
    efficient = "ScaledDotProductEfficientAttentionBackward0"
    assert efficient not in _grad_fn_names(
        F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True))
    with sdpa_kernel(SDPBackend.MATH):
        assert efficient not in _grad_fn_names(F.scaled_dot_product_attention(q, k, v))
    out, lse, _, _ = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True)
    assert lse.shape == (2, 3, 32) and lse.dtype == torch.float32
    scores = q.detach().cpu().double() @ k.detach().cpu().double().transpose(-2, -1) / 8 ** 0.5
    assert_same(lse[..., :5], scores.logsumexp(-1).float(), atol=1e-5, rtol=1e-5)
    assert_same(out, F.scaled_dot_product_attention(*(t.detach().cpu() for t in (q, k, v))),
                atol=1e-5, rtol=1e-5)


def test_sdpa_dropout_regenerates_its_mask_in_the_backward():
    # The kernel's dropout mask is a hash of each position under a seed it returns (CUDA's
    # returns a Philox seed): the backward regenerates it. Against a float64 reference with the
    # same mask, forward and gradients; the kept fraction; another seed, another mask.
    import torch.nn.functional as F
    from torch_pjrt._decompositions import _dropout_keep
    torch.manual_seed(0)
    q, k, v = (t.detach().to(DEVICE).requires_grad_() for t in _qkv(torch.float32, (2, 3, 6, 8)))
    p = 0.3
    out, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, None, True, p, True)
    keep = _dropout_keep(seed.cpu(), (2, 3, 6, 6), p)
    qd, kd, vd = (t.detach().cpu().double().requires_grad_() for t in (q, k, v))
    scores = (qd @ kd.transpose(-2, -1) / 8 ** 0.5).masked_fill(
        ~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    ref = torch.softmax(scores, -1) * keep / (1 - p) @ vd
    assert_same(out, ref.float().detach(), atol=1e-5, rtol=1e-5)
    grad = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    ref.backward(grad)
    grads = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
        grad.float().to(DEVICE), q, k, v, None, out, lse, seed, offset, p, [True] * 3 + [False], True)
    for a, b in zip(grads[:3], (qd, kd, vd)):
        assert_same(a, b.grad.float(), atol=1e-5, rtol=1e-5)
    many = _dropout_keep(torch.tensor(12345), (64, 64, 64), p).float().mean().item()
    assert abs(many - (1 - p)) < 0.005, many
    assert not torch.equal(_dropout_keep(torch.tensor(1), (64, 64), p),
                           _dropout_keep(torch.tensor(2), (64, 64), p))
    # Through SDPA, eager and compiled: the kernel with dropout, and gradients that flow.
    for fn in (F.scaled_dot_product_attention,
               torch.compile(F.scaled_dot_product_attention, backend="tpu", dynamic=False)):
        q.grad = None
        y = fn(q, k, v, dropout_p=p, is_causal=True)
        y.sum().backward()
        assert q.grad.isfinite().all() and not torch.equal(
            y.detach().cpu(), F.scaled_dot_product_attention(q, k, v, is_causal=True).detach().cpu())
    assert "ScaledDotProductEfficientAttentionBackward0" in _grad_fn_names(
        F.scaled_dot_product_attention(q, k, v, dropout_p=p))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_flex_attention_runs_on_tpu_and_matches_a_float64_reference(compiled):
    # PyTorch's FlexAttention refused every device outside its own list ("only supported on
    # CUDA, CPU, HPU, or MPS"); TorchTitan's models call it, compiled. A score_mod and a causal
    # block mask, forward and backward (CPU has no FlexAttention backward to compare with).
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    B, H, S, D = 2, 4, 32, 16
    q, k, v = (make((B, H, S, D), torch.float32, seed=i) for i in range(3))

    def bias(score, b, h, qi, ki):
        return score + (qi - ki) * 0.01

    mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, B, H, S, S, device=DEVICE)
    fn = torch.compile(flex_attention, backend="tpu") if compiled else flex_attention
    qt, kt, vt = (t.to(DEVICE).requires_grad_() for t in (q, k, v))
    torch_pjrt.reset_stats()
    with torch_pjrt.strict():
        out = fn(qt, kt, vt, score_mod=bias, block_mask=mask)
        out.sum().backward()
    i = torch.arange(S)
    qr, kr, vr = (t.double().requires_grad_() for t in (q, k, v))
    scores = qr @ kr.transpose(-1, -2) / D ** 0.5 + (i[:, None] - i[None, :]) * 0.01
    want = scores.masked_fill(i[:, None] < i[None, :], float("-inf")).softmax(-1) @ vr
    want.sum().backward()
    for got, ref in ((out, want), (qt.grad, qr.grad), (kt.grad, kr.grad), (vt.grad, vr.grad)):
        torch.testing.assert_close(got.detach().cpu().double(), ref.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mask", ["none", "causal", "float"])
def test_sdpa_fused_attention_overrideable_forward_and_backward(mask):
    # PyTorch's fused-attention hook for out-of-tree devices (a third-party conformance suite
    # calls it): forward and its backward op against the math path on CPU.
    import torch.nn.functional as F
    q, k, v = _qkv(torch.float32)
    m = torch.randn(2, 1, 5, 5, generator=torch.Generator().manual_seed(4)) if mask == "float" else None
    causal = mask == "causal"
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
    grad = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, (q, k, v), grad)
    tq, tk, tv = (t.detach().to(DEVICE) for t in (q, k, v))
    tm = None if m is None else m.to(DEVICE)
    aten = torch.ops.aten
    with torch_pjrt.strict():
        res = aten._scaled_dot_product_fused_attention_overrideable(tq, tk, tv, tm, 0.0, causal)
        out, lse = res[0], res[1]
        grads = aten._scaled_dot_product_fused_attention_overrideable_backward(
            grad.to(DEVICE), tq, tk, tv, tm, [True, True, True, False], out, lse, res[2], res[3],
            res[4], res[5], 0.0, causal, res[6], res[7])
    assert res[4] == 5 and res[5] == 5 and lse.shape == (2, 3, 5)
    assert_same(out, ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads[:3], ref_grads):
        assert_same(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_trains_natively(mode):
    # _embedding_bag and its backwards fell back to CPU. An nn.EmbeddingBag model (offsets,
    # padding_idx, per-sample weights for sum, include_last_offset) trained a few SGD steps in
    # strict mode ends with CPU's weights.
    g = torch.Generator().manual_seed(6)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 2, 0])
    offsets = torch.tensor([0, 4, 4, 6, 10])  # an empty bag, include_last_offset
    psw = torch.rand(10, generator=g) if mode == "sum" else None
    models = []
    for dev in ("cpu", DEVICE):
        torch.manual_seed(0)
        bag = torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2, include_last_offset=True,
                                    scale_grad_by_freq=mode == "mean").to(dev)
        opt = torch.optim.SGD(bag.parameters(), lr=0.1)
        with torch_pjrt.strict(dev == DEVICE):
            for _ in range(3):
                out = bag(idx.to(dev), offsets.to(dev),
                          per_sample_weights=None if psw is None else psw.to(dev))
                loss = (out * torch.arange(12.0, device=dev).reshape(4, 3)).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        models.append((out, bag.weight))
    (out_c, w_c), (out_t, w_t) = models
    assert_same(out_t, out_c, atol=1e-5, rtol=1e-5)
    assert_same(w_t, w_c, atol=1e-5, rtol=1e-5)
