"""Neural-net ops against CPU where their dtype handling is easy to get wrong: integer
convolutions, dropout backward of integer gradients, half-type normalization and convolution."""
import pytest
import torch
import torch.nn.functional as F
import torch_pjrt

from tpu_helpers import DEVICE, assert_same, make


@pytest.mark.parametrize("fn,wshape", [(F.conv1d, (4, 3, 2)), (F.conv2d, (4, 3, 2, 3)),
                                       (F.conv_transpose1d, (3, 4, 3)), (F.conv_transpose2d, (3, 4, 2, 2))],
                         ids=["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"])
def test_int64_convolution_is_exact(fn, wshape):
    nd = len(wshape) - 2
    x = make((2, 3) + (7,) * nd, torch.int64, low=-100, high=100)
    w = make(wshape, torch.int64, seed=1, low=-100, high=100)
    b = make((wshape[1] if "transpose" in fn.__name__ else wshape[0],), torch.int64, seed=2)
    for kw in ({}, {"stride": 2, "padding": 1}, {"dilation": 2}):
        expected = fn(x, w, b, **kw)
        assert_same(fn(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE), **kw), expected)


def test_int32_convolution_falls_back_like_cpu():
    x, w = make((1, 2, 5), torch.int32), make((3, 2, 2), torch.int32, seed=1)
    assert_same(F.conv1d(x.to(DEVICE), w.to(DEVICE)), F.conv1d(x, w))


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


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("cls", [torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.InstanceNorm2d])
def test_norm_module_backward_matches_cpu(cls, train):
    # An eval-mode forward saves no statistics (empty vectors): the backward must accept them.
    import copy
    torch.manual_seed(0)
    m = (cls(3, track_running_stats=True, affine=True) if cls is torch.nn.InstanceNorm2d else cls(3)).train(train)
    shape = (4, 3) if cls is torch.nn.BatchNorm1d else (2, 3, 4, 4)
    x = make(shape, torch.float32, seed=1).requires_grad_()
    md = copy.deepcopy(m).to(DEVICE)
    xd = x.detach().to(DEVICE).requires_grad_()
    w = make(shape, torch.float32, seed=2)
    (m(x) * w).sum().backward()
    (md(xd) * w.to(DEVICE)).sum().backward()
    assert_same(xd.grad, x.grad, atol=1e-5, rtol=1e-5)
    assert_same(md.weight.grad, m.weight.grad, atol=1e-5, rtol=1e-5)


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
