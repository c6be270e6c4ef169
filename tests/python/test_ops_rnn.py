"""Recurrent modules on tpu against CPU, in strict mode (any CPU fallback fails the test).

PyTorch runs nn.LSTM / nn.GRU / LSTMCell / GRUCell on an accelerator through the fused cell
kernels _thnn_fused_lstm_cell and _thnn_fused_gru_cell (and their backwards), which have no CPU
kernel: they are lowered natively (csrc/ops/rnn.c) with CUDA's workspace layouts. Every module
test copies one CPU module to tpu and compares outputs, input gradients and parameter gradients.
Half types: the fused cells compute in f32 and round once, while CPU's unfused cells round after
every op; over these few steps and layers the largest difference, |tpu - cpu| / (1 + |cpu|), was
5.1e-3 for bf16 and 7.8e-4 for f16 (f32 2.3e-7, f64 2.6e-16), within tpu_helpers' tolerances.
"""
import contextlib
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_pjrt
from tpu_helpers import DEVICE, FLOAT_DTYPES, assert_same, fallbacks, make

T, B, I, H = 4, 3, 4, 5  # one set of sizes, so the eager programs are shared across tests

@pytest.fixture(autouse=True)
def _no_fallbacks(fresh_stats):
    yield
    assert fallbacks() == {}, f"ops fell back to CPU: {fallbacks()}"


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, nn.utils.rnn.PackedSequence):
        return [x.data]
    return [t for e in x for t in _flat(e)]


def _weighted_sum(outs):
    """A loss that gives every output element its own gradient."""
    return sum((o.float() * make(o.shape, torch.float32, seed=10 + k, low=-1, high=1).to(o.device)).sum()
               for k, o in enumerate(outs))


def _run(module, inputs, call, dev):
    m = copy.deepcopy(module).to(dev)
    xs = [x.detach().to(dev).requires_grad_() for x in inputs]
    with torch_pjrt.strict() if dev == DEVICE else contextlib.nullcontext():
        outs = _flat(call(m, *xs))
        _weighted_sum(outs).backward()
    grads = [x.grad for x in xs] + [p.grad for p in m.parameters()]
    assert all(g is not None for g in grads)
    return [o.detach() for o in outs], grads


def check_module(module, inputs, call=lambda m, *xs: m(*xs)):
    """Forward and backward of |module| (a CPU module) on CPU and on tpu: same results."""
    exp_outs, exp_grads = _run(module, inputs, call, "cpu")
    outs, grads = _run(module, inputs, call, DEVICE)
    assert len(outs) == len(exp_outs)
    for a, e in zip(outs + grads, exp_outs + exp_grads):
        assert_same(a, e)


def _data(*shape, dtype=torch.float32, seed=0):
    return make(shape, dtype, seed=seed, low=-1, high=1)


def _module(cls, *args, dtype=torch.float32, **kw):
    torch.manual_seed(0)
    return cls(*args, **kw).to(dtype)


# ---- nn.LSTM / nn.GRU / nn.RNN ----

@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_module_dtypes(cls, dtype):
    check_module(_module(cls, I, H, dtype=dtype), [_data(T, B, I, dtype=dtype)])


@pytest.mark.parametrize("kw", [dict(num_layers=2, bidirectional=True), dict(batch_first=True, bias=False)],
                         ids=["bidirectional_2layers", "batch_first_nobias"])
@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_module_configurations(cls, kw):
    x = _data(B, T, I) if kw.get("batch_first") else _data(T, B, I)
    check_module(_module(cls, I, H, **kw), [x])


def test_lstm_initial_state():
    layers = 2 * 2
    check_module(_module(nn.LSTM, I, H, num_layers=2, bidirectional=True),
                 [_data(T, B, I), _data(layers, B, H, seed=1), _data(layers, B, H, seed=2)],
                 call=lambda m, x, h, c: m(x, (h, c)))


@pytest.mark.parametrize("kw", [dict(), dict(num_layers=2, bidirectional=True)], ids=["1layer", "bidirectional_2layers"])
def test_lstm_proj_size(kw):
    check_module(_module(nn.LSTM, I, H, proj_size=3, **kw), [_data(T, B, I)])


def test_gru_initial_state():
    check_module(_module(nn.GRU, I, H, num_layers=2), [_data(T, B, I), _data(2, B, H, seed=1)],
                 call=lambda m, x, h: m(x, h))


@pytest.mark.parametrize("kw", [dict(num_layers=2), dict(nonlinearity="relu", bidirectional=True),
                                dict(nonlinearity="relu", batch_first=True, bias=False)],
                         ids=["tanh_2layers", "relu_bidirectional", "relu_batch_first_nobias"])
def test_rnn(kw):
    x = _data(B, T, I) if kw.get("batch_first") else _data(T, B, I)
    check_module(_module(nn.RNN, I, H, **kw), [x])


def test_long_sequence_stacks_natively():
    # A sequence's step outputs are stacked by one cat of T tensors, more than one call's
    # argument slots hold: the cat is reduced in chunks on the device (TP_OPF_LIST_CHUNKS).
    check_module(_module(nn.GRU, I, H), [_data(40, B, I)])


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_unbatched_input(cls):
    check_module(_module(cls, I, H), [_data(T, I)])


# ---- packed sequences ----

def _packed_call(lengths, batch_first, enforce_sorted=False):
    def call(m, x, *state):
        p = pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        y, h = m(p, *state)
        padded, out_lengths = pad_packed_sequence(y, batch_first=batch_first, total_length=T)
        assert out_lengths.tolist() == list(lengths)
        return [padded, h]
    return call


@pytest.mark.parametrize("cls,kw", [(nn.LSTM, dict(bidirectional=True)),
                                    (nn.LSTM, dict(proj_size=3, batch_first=True)),
                                    (nn.GRU, dict(bidirectional=True, batch_first=True)),
                                    (nn.RNN, dict(nonlinearity="relu"))],
                         ids=["lstm_bidirectional", "lstm_proj_batch_first", "gru_bidirectional",
                              "rnn_relu"])
def test_packed_sequence(cls, kw):
    bf = kw.get("batch_first", False)
    x = _data(B, T, I) if bf else _data(T, B, I)
    # Lengths on CPU, unsorted, as users pass them.
    check_module(_module(cls, I, H, **kw), [x], call=_packed_call(torch.tensor([2, T, 3]), bf))


def test_packed_sequence_sorted_lengths_list():
    check_module(_module(nn.GRU, I, H), [_data(T, B, I)],
                 call=_packed_call([T, 3, 1], False, enforce_sorted=True))


def test_packed_sequence_packed_on_cpu_then_moved():
    m = _module(nn.LSTM, I, H, bidirectional=True)
    packed = pack_padded_sequence(_data(T, B, I), torch.tensor([T, 1, 2]), enforce_sorted=False)
    y, (h, c) = m(packed)
    with torch_pjrt.strict():
        yt, (ht, ct) = copy.deepcopy(m).to(DEVICE)(packed.to(DEVICE))
    assert yt.data.device.type == DEVICE and yt.batch_sizes.device.type == "cpu"
    for a, e in [(yt.data, y.data), (ht, h), (ct, c)]:
        assert_same(a, e)
    assert torch.equal(yt.sorted_indices.cpu(), y.sorted_indices)


# ---- cells ----

@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_lstm_cell(dtype):
    m = _module(nn.LSTMCell, I, H, dtype=dtype)
    check_module(m, [_data(B, I, dtype=dtype), _data(B, H, dtype=dtype, seed=1), _data(B, H, dtype=dtype, seed=2)],
                 call=lambda m, x, h, c: m(x, (h, c)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_gru_cell(dtype):
    m = _module(nn.GRUCell, I, H, dtype=dtype)
    check_module(m, [_data(B, I, dtype=dtype), _data(B, H, dtype=dtype, seed=1)])


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell, nn.RNNCell], ids=["lstm", "gru", "rnn"])
def test_cells_without_state_or_bias(cls):
    check_module(_module(cls, I, H), [_data(B, I)])
    check_module(_module(cls, I, H, bias=False), [_data(B, I)])
    check_module(_module(cls, I, H), [_data(I)])  # unbatched


def test_cells_unrolled_over_time():
    """A decoder loop: the cell's state carries across steps, the loss reads every step."""
    lstm, gru = _module(nn.LSTMCell, I, H), _module(nn.GRUCell, H, H)

    def call(m, x):
        h = c = g = None
        outs = []
        for t in range(x.shape[0]):
            h, c = m[0](x[t], None if h is None else (h, c))
            g = m[1](h, g)
            outs.append(g)
        return [torch.stack(outs), c]
    check_module(nn.ModuleList([lstm, gru]), [_data(T, B, I)], call=call)


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell], ids=["lstm", "gru"])
def test_cell_double_backward(cls):
    """create_graph=True differentiates PyTorch's composite cell backward, natively too."""
    m = _module(cls, I, H, dtype=torch.float64)
    res = {}
    for dev in ("cpu", DEVICE):
        md = copy.deepcopy(m).to(dev)
        x = _data(B, I, dtype=torch.float64).to(dev).requires_grad_()
        with torch_pjrt.strict() if dev == DEVICE else contextlib.nullcontext():
            h = _flat(md(x))[0]
            gx, = torch.autograd.grad((h * h).sum(), x, create_graph=True)
            (gx * gx).sum().backward()
        res[dev] = [gx.detach(), x.grad] + [p.grad for p in md.parameters()]
    for a, e in zip(res[DEVICE], res["cpu"]):
        assert_same(a, e)


# ---- the fused cell ops themselves: CUDA's semantics and workspace layouts ----

def _lstm_reference(ig, hg, cx, b1, b2):
    """The cell in f64: (hy, cy, [i, f, g, o])."""
    s = ig.double() + hg.double() + (b1.double() + b2.double() if b1 is not None else 0)
    i, f, g, o = s.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx.double() + i * g
    return o * cy.tanh(), cy, torch.cat([i, f, g, o], 1)


def _gru_reference(ig, hg, hx, b1, b2):
    """The cell in f64: (hy, [r, z, n, hx, hn]) with hn the hidden n part plus its bias."""
    if b1 is not None:
        ig, hg = ig.double() + b1.double(), hg.double() + b2.double()
    xr, xz, xn = ig.double().chunk(3, 1)
    hr, hz, hn = hg.double().chunk(3, 1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    hy = n + z * (hx.double() - n)
    return hy, torch.cat([r, z, n, hx.double(), hn], 1)


_CELL_OP_CASES = [(d, True) for d in FLOAT_DTYPES] + [(torch.float32, False)]
_CELL_OP_IDS = [str(d) for d in FLOAT_DTYPES] + ["nobias"]


def _bias_grad(gates):
    """A bias gradient as CUDA computes it: the rounded gate gradients summed over the batch."""
    g = gates.cpu()
    return g.to(torch.promote_types(g.dtype, torch.float32)).sum(0).to(g.dtype)


def _cell_op_inputs(gates, dtype, bias):
    """A fused cell's inputs (input gates, hidden gates, state, b1, b2; the biases None without
    bias) for `gates` gates, and their f64 copies as autograd leaves for the reference."""
    ig, hg, state = _data(B, gates * H, dtype=dtype), _data(B, gates * H, dtype=dtype, seed=1), \
        _data(B, H, dtype=dtype, seed=2)
    b1, b2 = (_data(gates * H, dtype=dtype, seed=3), _data(gates * H, dtype=dtype, seed=4)) if bias else (None, None)
    leaves = [t.double().requires_grad_() for t in (ig, hg, state)] + \
             ([t.double().requires_grad_() for t in (b1, b2)] if bias else [None, None])
    return (ig, hg, state, b1, b2), leaves


@pytest.mark.parametrize("dtype,bias", _CELL_OP_CASES, ids=_CELL_OP_IDS)
def test_fused_lstm_cell_op(dtype, bias):
    aten = torch.ops.aten
    (ig, hg, cx, b1, b2), leaves = _cell_op_inputs(4, dtype, bias)
    hy_e, cy_e, ws_e = _lstm_reference(*leaves)
    gh, gc = _data(B, H, dtype=dtype, seed=5), _data(B, H, dtype=dtype, seed=6)
    with torch_pjrt.strict():
        hy, cy, ws = aten._thnn_fused_lstm_cell(*[t.to(DEVICE) if t is not None else None
                                                  for t in (ig, hg, cx, b1, b2)])
        g_gates, g_cx, g_bias = aten._thnn_fused_lstm_cell_backward_impl(
            gh.to(DEVICE), gc.to(DEVICE), cx.to(DEVICE), cy, ws, bias)
        # An unused output's gradient arrives as None and counts as zero.
        g_gates_h, _, _ = aten._thnn_fused_lstm_cell_backward_impl(gh.to(DEVICE), None, cx.to(DEVICE), cy, ws, bias)
    # Results rounded once from f32 (one ulp of the half type from the f64 reference).
    for a, e in [(hy, hy_e), (cy, cy_e), (ws, ws_e)]:
        assert_same(a, e.detach().to(dtype))
    *grads, gx = torch.autograd.grad([hy_e, cy_e], leaves[:3], [gh.double(), gc.double()], retain_graph=True)
    # The backward reads the rounded workspace and cy, so half types sit a few ulps from f64.
    assert_same(g_gates, grads[0].to(dtype))
    assert_same(g_gates, grads[1].to(dtype))  # the same for both gate inputs
    assert_same(g_cx, gx.to(dtype))
    assert_same(g_bias, _bias_grad(g_gates))
    g_only_h, = torch.autograd.grad(hy_e, leaves[0], gh.double())
    assert_same(g_gates_h, g_only_h.to(dtype))


@pytest.mark.parametrize("dtype,bias", _CELL_OP_CASES, ids=_CELL_OP_IDS)
def test_fused_gru_cell_op(dtype, bias):
    aten = torch.ops.aten
    (ig, hg, hx, b1, b2), leaves = _cell_op_inputs(3, dtype, bias)
    hy_e, ws_e = _gru_reference(*leaves)
    gh = _data(B, H, dtype=dtype, seed=5)
    with torch_pjrt.strict():
        hy, ws = aten._thnn_fused_gru_cell(*[t.to(DEVICE) if t is not None else None for t in (ig, hg, hx, b1, b2)])
        g_ig, g_hg, g_hx, g_ib, g_hb = aten._thnn_fused_gru_cell_backward(gh.to(DEVICE), ws, bias)
    assert_same(hy, hy_e.detach().to(dtype))
    assert_same(ws, ws_e.detach().to(dtype))
    wanted = [l for l in leaves if l is not None]
    exp = torch.autograd.grad(hy_e, wanted, gh.double())
    for a, e in zip([g_ig, g_hg, g_hx], exp):
        assert_same(a, e.to(dtype))
    if bias:
        for a, e in zip([g_ib, g_hb], exp[3:]):
            assert_same(a, e.to(dtype))
    assert_same(g_ib, _bias_grad(g_ig))
    assert_same(g_hb, _bias_grad(g_hg))


@pytest.mark.parametrize("call,message", [
    (lambda a, d: a._thnn_fused_lstm_cell(torch.randn(2, 8, device=d), torch.randn(2, 4, device=d),
                                          torch.randn(2, 2, device=d)), r"expected hidden_gates of shape \[2, 8\]"),
    (lambda a, d: a._thnn_fused_lstm_cell(torch.randn(2, 7, device=d), torch.randn(2, 7, device=d),
                                          torch.randn(2, 2, device=d)), r"4 \* hidden_size"),
    (lambda a, d: a._thnn_fused_lstm_cell(torch.randn(2, 8, device=d), torch.randn(2, 8, device=d),
                                          torch.randn(3, 2, device=d)), r"expected cx of shape \[2, 2\]"),
    (lambda a, d: a._thnn_fused_gru_cell(torch.randn(2, 6, device=d), torch.randn(2, 6, device=d),
                                         torch.randn(2, 2, device=d), torch.randn(5, device=d),
                                         torch.randn(6, device=d)), r"expected input_bias of shape \[6\]"),
    (lambda a, d: a._thnn_fused_gru_cell(torch.randn(2, 6, device=d), torch.randn(2, 6, device=d, dtype=torch.float64),
                                         torch.randn(2, 2, device=d)), r"hidden_gates to have dtype float32"),
    (lambda a, d: a._thnn_fused_gru_cell_backward(torch.randn(2, 2, device=d), torch.randn(2, 9, device=d), True),
     r"expected workspace of shape \[2, 10\]"),
    (lambda a, d: a._thnn_fused_lstm_cell_backward_impl(torch.randn(2, 3, device=d), None, torch.randn(2, 2, device=d),
                                                        torch.randn(2, 2, device=d), torch.randn(2, 8, device=d), True),
     r"expected grad_hy of shape \[2, 2\]"),
], ids=["lstm_hidden_gates", "lstm_gate_count", "lstm_cx", "gru_bias", "gru_dtype", "gru_bwd_workspace",
        "lstm_bwd_grad"])
def test_bad_arguments_raise(call, message):
    with torch_pjrt.strict(), pytest.raises(RuntimeError, match=message):
        call(torch.ops.aten, DEVICE)


def test_module_shape_errors_are_pytorchs():
    with torch_pjrt.strict(), pytest.raises(RuntimeError, match="input_size"):
        nn.LSTM(I, H).to(DEVICE)(torch.randn(T, B, I + 1, device=DEVICE))
    with torch_pjrt.strict(), pytest.raises(RuntimeError, match="Expected hidden size"):
        nn.GRU(I, H).to(DEVICE)(torch.randn(T, B, I, device=DEVICE), torch.randn(1, B, H + 1, device=DEVICE))


# ---- training ----

def _train(model, batches, loss_fn, dev, steps=3):
    model = copy.deepcopy(model).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    losses = []
    with torch_pjrt.strict() if dev == DEVICE else contextlib.nullcontext():
        for step in range(steps):
            x, y = (t.to(dev) for t in batches[step % len(batches)])
            opt.zero_grad()
            loss = loss_fn(model, x, y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return torch.stack(losses), [p.detach() for p in model.parameters()]


def _check_training(model, batches, loss_fn, steps=3):
    exp_losses, exp_params = _train(model, batches, loss_fn, "cpu", steps)
    losses, params = _train(model, batches, loss_fn, DEVICE, steps)
    assert_same(losses, exp_losses, rtol=1e-5, atol=1e-5)
    for a, e in zip(params, exp_params):
        assert_same(a, e, rtol=1e-5, atol=1e-5)
    assert losses[-1] < losses[0], "training did not reduce the loss"


class _Tagger(nn.Module):
    """Sequence tagging: a 2-layer bidirectional LSTM over embeddings, a GRU on top, a linear head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, I)
        self.lstm = nn.LSTM(I, H, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(2 * H, H, batch_first=True)
        self.head = nn.Linear(H, 3)

    def forward(self, tokens):
        y, _ = self.lstm(self.embed(tokens))
        y, _ = self.gru(y)
        return self.head(y)


def test_training_sgd():
    torch.manual_seed(0)
    model = _Tagger()
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 10, (B, T), generator=g), torch.randint(0, 3, (B, T), generator=g))]
    _check_training(model, batches, lambda m, x, y: F.cross_entropy(m(x).reshape(-1, 3), y.reshape(-1)), steps=4)


class _TinyVad(nn.Module):
    """A silero-VAD-like voice activity detector: a strided conv front end over raw audio, an
    LSTM over the frames (its state carried across chunks when streaming), a 1x1 conv decoder and
    a sigmoid: the speech probability per frame."""

    def __init__(self):
        super().__init__()
        self.frontend = nn.Sequential(nn.Conv1d(1, 8, kernel_size=8, stride=4, padding=2), nn.ReLU(),
                                      nn.Conv1d(8, 8, kernel_size=3, padding=1), nn.ReLU())
        self.lstm = nn.LSTM(8, 8, batch_first=True)
        self.decoder = nn.Sequential(nn.ReLU(), nn.Conv1d(8, 1, kernel_size=1))

    def forward(self, audio, state=None):  # audio: [batch, samples]
        frames = self.frontend(audio.unsqueeze(1)).transpose(1, 2)
        y, state = self.lstm(frames, state)
        return torch.sigmoid(self.decoder(y.transpose(1, 2))).squeeze(1), state


def _vad_batches():
    g = torch.Generator().manual_seed(0)
    audio = torch.randn(2, 48, generator=g)  # 12 frames: see test_long_sequence_stacks_natively
    audio[0, 24:] *= 0.05  # the second half of the first clip is near-silence
    labels = (audio.reshape(2, 12, 4).abs().mean(-1) > 0.3).float()
    return [(audio, labels)]


def test_vad_like_model_trains():
    torch.manual_seed(0)
    _check_training(_TinyVad(), _vad_batches(),
                    lambda m, x, y: F.binary_cross_entropy(m(x)[0], y), steps=3)


def test_vad_like_model_streams():
    """Chunked inference with the LSTM state carried over matches CPU, chunk by chunk."""
    torch.manual_seed(0)
    model = _TinyVad().eval()
    audio = _vad_batches()[0][0]
    tpu_model = copy.deepcopy(model).to(DEVICE)
    state, tpu_state = None, None
    with torch.no_grad():
        for chunk in audio.split(24, dim=1):
            p, state = model(chunk, state)
            with torch_pjrt.strict():
                tp, tpu_state = tpu_model(chunk.to(DEVICE), tpu_state)
            assert_same(tp, p)
    for a, e in zip(tpu_state, state):
        assert_same(a, e)
