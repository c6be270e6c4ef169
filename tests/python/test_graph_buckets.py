"""Shape buckets for compiled graphs with symbolic shapes (python/torch_pjrt/_graph_buckets.py):
one program per bucket, not per shape, with results equal to CPU across bucket boundaries; ops
that read across a padded dim read the padding as their identity; graphs the rewrite cannot
pad are refused and compiled per shape, with the same results."""
import copy

import pytest
import torch
import torch.nn as nn

import torch_pjrt.compile as tc
from tpu_helpers import assert_same

SIZES = (3, 5, 9, 17, 20)  # buckets 16, 16, 16, 32, 32 under the default policy


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _sweep(f, make, sizes=SIZES, tol=1e-5):
    """Runs compiled |f| on tpu over inputs make(n) against f on CPU; the graphs it specialized
    (each one partition: one program, unless the disk cache already holds it)."""
    g = torch.compile(f, backend="tpu", dynamic=True)
    before = tc.stats()["partitions"]
    for n in sizes:
        xs = make(n)
        got, want = g(*(x.to("tpu") for x in xs)), f(*xs)
        for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
            assert_same(a, b, atol=tol, rtol=tol)
    return tc.stats()["partitions"] - before


def _x(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


REDUCTIONS = {
    "sum": lambda x: x.sum(0),
    "mean": lambda x: x.mean(0, keepdim=True),
    "mean_all": lambda x: x.mean(),
    "amax": lambda x: x.amax(0),
    "max_dim": lambda x: x.max(0),
    "argmax": lambda x: x.argmax(0),
    "argmin": lambda x: (-x.abs()).argmin(0),
    "prod": lambda x: (x * 0.1 + 1).prod(0),
    "logsumexp": lambda x: x.logsumexp(0),
    "softmax": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(0),
    "cumsum": lambda x: x.cumsum(0),
    "any_all": lambda x: ((x > 1.5).any(0), (x > -3).all(0)),
    "contraction": lambda x: x.t() @ x,
    "by_size": lambda x: x * x.shape[0] + x.sum() / x.shape[0],
    "diff": lambda x: (x[1:] - x[:-1]).abs().amax(0),  # slices to an end relative to the size
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_ops_across_a_padded_dim_read_the_padding_as_their_identity(name):
    f = REDUCTIONS[name]
    # Non-finite values in the padding would leak into any reduction that read them: the
    # padding of a bucket is zeros here, so -inf inputs check max/softmax/all separately.
    compiles = _sweep(f, lambda n: [_x(n, 6, seed=n)])
    assert compiles == 2, compiles  # one program per bucket
    assert tc.stats()["bucketed_graphs"] == 2 and tc.stats()["bucket_refused"] == {}


def test_softmax_over_a_padded_dim_with_negative_infinity_rows():
    def f(x):
        return torch.where(x > 0, x, float("-inf")).softmax(-1)
    # Every live row has a finite entry; the padding must not be the row's maximum.
    compiles = _sweep(f, lambda n: [_x(4, n, seed=n).abs() - 0.5 + torch.eye(4, n)])
    assert compiles == 2


def test_embedding_and_linear_on_padded_integer_ids():
    torch.manual_seed(0)
    emb, lin = nn.Embedding(50, 8), nn.Linear(8, 5)

    def f(ids):
        return lin(emb(ids)).log_softmax(-1).sum(1)
    g = lambda n: [torch.randint(0, 50, (2, n), generator=torch.Generator().manual_seed(n))]
    emb_t, lin_t = nn.Embedding(50, 8), nn.Linear(8, 5)
    emb_t.load_state_dict(emb.state_dict())
    lin_t.load_state_dict(lin.state_dict())
    emb_t.to("tpu"), lin_t.to("tpu")
    h = torch.compile(lambda ids: lin_t(emb_t(ids)).log_softmax(-1).sum(1), backend="tpu",
                      dynamic=True)
    for n in SIZES:
        (ids,) = g(n)
        assert_same(h(ids.to("tpu")), f(ids), atol=1e-5, rtol=1e-5)
    assert tc.stats()["bucketed_graphs"] == 2, tc.stats()


def test_transformer_layer_without_a_mask_attends_to_live_keys_only():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    on_tpu = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    on_tpu.load_state_dict(layer.state_dict())
    on_tpu.to("tpu")
    g = torch.compile(on_tpu, backend="tpu", dynamic=True)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            for n in SIZES:
                x = _x(2, n, 16, seed=n)
                assert_same(g(x.to("tpu")), layer(x), atol=1e-5, rtol=1e-5)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    s = tc.stats()
    assert s["bucketed_graphs"] == 2 and s["bucket_refused"] == {}, s


def test_graphs_that_cannot_pad_are_compiled_per_shape_with_the_same_results():
    cases = {
        "last position": lambda x: x[-1] * 2,                  # reads the end of a padded dim
        "flatten": lambda x: x.t().reshape(-1).cumsum(0),      # padding between rows, summed
        "cat of two": lambda x: torch.cat([x, x * 2]).sum(0),  # padding inside the result
        "sort": lambda x: x.sort(0).values,
    }
    for name, f in cases.items():
        torch._dynamo.reset()
        tc.reset_stats()
        compiles = _sweep(f, lambda n: [_x(n, 3, seed=n)])
        assert compiles == len(SIZES), (name, compiles)
        assert tc.stats()["bucketed_graphs"] == 0 and tc.stats()["bucket_refused"], name


def test_an_input_mutated_in_place_keeps_its_live_part():
    def f(x, acc):
        acc.add_(x.sum(1, keepdim=True))
        return acc * 2
    g = torch.compile(f, backend="tpu", dynamic=True)
    for n in SIZES:
        x, acc = _x(n, 4, seed=n), _x(n, 1, seed=n + 1)
        acc_t = acc.to("tpu")
        got = g(x.to("tpu"), acc_t)
        want = f(x, acc)
        assert_same(got, want, atol=1e-5, rtol=1e-5)
        assert_same(acc_t, acc, atol=1e-5, rtol=1e-5)
    assert tc.stats()["bucketed_graphs"] == 2


def test_training_step_with_a_symbolic_batch():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    m = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    m.load_state_dict(ref.state_dict())
    m.to("tpu")
    g = torch.compile(lambda x: m(x).log_softmax(-1).mean(), backend="tpu", dynamic=True)
    for n in SIZES:
        x = _x(n, 6, seed=n)
        for p in (*m.parameters(), *ref.parameters()):
            p.grad = None
        loss = g(x.to("tpu"))
        loss.backward()
        want = ref(x).log_softmax(-1).mean()
        want.backward()
        assert_same(loss, want, atol=1e-5, rtol=1e-5)
        for p, q in zip(m.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-5)
    s = tc.stats()
    assert s["bucketed_graphs"] == 4 and s["bucket_refused"] == {}, s  # forward and backward


def test_buckets_off_compiles_per_shape(monkeypatch):
    from torch_pjrt import _C
    monkeypatch.setattr(_C, "bucket_enabled", lambda: False)
    compiles = _sweep(lambda x: x.softmax(0), lambda n: [_x(n, 2, seed=n)])
    assert compiles == len(SIZES) and tc.stats()["bucketed_graphs"] == 0


def _hf(name):
    import transformers as tf
    tf.logging.set_verbosity_error()
    torch.manual_seed(0)
    small = dict(vocab_size=99, num_hidden_layers=2, num_attention_heads=4)
    more = {
        "qwen2": lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(
            hidden_size=32, intermediate_size=37, num_key_value_heads=2, **small)),
        "phi": lambda: tf.PhiForCausalLM(tf.PhiConfig(
            hidden_size=32, intermediate_size=37, resid_pdrop=0.0, embd_pdrop=0.0, **small)),
        "gpt_neox": lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
            hidden_size=32, intermediate_size=37, **small)),
        "opt": lambda: tf.OPTForCausalLM(tf.OPTConfig(
            hidden_size=32, ffn_dim=37, word_embed_proj_dim=32, dropout=0.0, **small)),
        "gemma": lambda: tf.GemmaForCausalLM(tf.GemmaConfig(
            hidden_size=32, intermediate_size=37, num_key_value_heads=1, head_dim=8, **small)),
        "distilbert": lambda: tf.DistilBertForMaskedLM(tf.DistilBertConfig(
            vocab_size=99, dim=32, hidden_dim=37, n_layers=2, n_heads=4, dropout=0.0)),
        "t5": lambda: tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=99, d_model=32, d_ff=37, num_layers=2, num_heads=4, d_kv=8,
            decoder_start_token_id=0, dropout_rate=0.0)),
        "bart": lambda: tf.BartForConditionalGeneration(tf.BartConfig(
            vocab_size=99, d_model=32, encoder_ffn_dim=37, decoder_ffn_dim=37, encoder_layers=1,
            decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, dropout=0.0)),
    }
    if name in more:
        return more[name]()
    if name == "llama":
        cfg = tf.LlamaConfig(vocab_size=99, hidden_size=32, intermediate_size=37,
                             num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                             max_position_embeddings=64)
        return tf.LlamaForCausalLM(cfg)
    if name == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=2,
                                                n_positions=64))
    return tf.BertForMaskedLM(tf.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                            num_attention_heads=2, intermediate_size=37))


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("name", ["llama", "gpt2", "bert", "opt", "t5"])
def test_hugging_face_models_over_sequence_lengths(name, train):
    """Models as users compile them (torch.compile(model), Dynamo's automatic dynamic shapes
    after the first new length), a batch of 2 whose second row starts with padding: the logits,
    the loss and every gradient against CPU, and the graphs one program per bucket."""
    ref = _hf(name).train(train)
    for m in ref.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    model = copy.deepcopy(ref).to("tpu")
    fwd = torch.compile(model, backend="tpu")
    for n in (5, 7, 9, 17, 20):
        ids = torch.randint(3, 99, (2, n), generator=torch.Generator().manual_seed(n))
        mask = torch.ones(2, n, dtype=torch.long)
        mask[1, :2] = 0
        kw = dict(input_ids=ids, attention_mask=mask, labels=ids) if train else \
            dict(input_ids=ids, attention_mask=mask)
        if name == "t5" and not train:
            kw["decoder_input_ids"] = ids[:, :max(2, n // 2)]
        with torch.set_grad_enabled(train):
            got = fwd(**{k: v.to("tpu") for k, v in kw.items()})
            want = ref(**kw)
        assert_same(got.logits, want.logits, atol=1e-5, rtol=1e-4)
        if train:
            model.zero_grad(set_to_none=True)
            ref.zero_grad(set_to_none=True)
            got.loss.backward()
            want.loss.backward()
            assert_same(got.loss, want.loss, atol=1e-5, rtol=1e-4)
            for (pn, p), q in zip(model.named_parameters(), ref.parameters()):
                if q.grad is not None:
                    assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    s = tc.stats()
    # Per graph Dynamo captures: an exact program for the first length, then the graph with a
    # symbolic length, one program per bucket (16 and 32): as many as the graphs.
    assert s["bucket_refused"] == {} and s["bucketed_graphs"] == s["graphs"], s


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
def test_cnn_with_a_dynamic_batch(train):
    """mark_dynamic on the batch of a small CNN: convolutions, pooling and (eval) batch norm run
    per sample, so a padded batch is exact; the weights' gradients sum over live samples only."""
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 4, 3),
              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5)]
    if not train:
        layers.insert(1, nn.BatchNorm2d(4))
    ref = nn.Sequential(*layers).train(train)
    if not train:
        ref[1].running_mean.uniform_(-0.5, 0.5)
        ref[1].running_var.uniform_(0.5, 2)
    model = copy.deepcopy(ref).to("tpu")
    step = torch.compile(lambda x: model(x).log_softmax(-1).mean(), backend="tpu")
    for n in (3, 5, 9, 17):
        x = _x(n, 3, 8, 8, seed=n)
        xt = x.to("tpu")
        torch._dynamo.mark_dynamic(xt, 0)
        with torch.set_grad_enabled(train):
            got, want = step(xt), ref(x).log_softmax(-1).mean()
        assert_same(got, want, atol=1e-5, rtol=1e-5)
        if train:
            model.zero_grad(set_to_none=True)
            ref.zero_grad(set_to_none=True)
            got.backward()
            want.backward()
            for p, q in zip(model.parameters(), ref.parameters()):
                assert_same(p.grad, q.grad, atol=1e-5, rtol=1e-4)
    s = tc.stats()
    assert s["bucket_refused"] == {} and s["bucketed_graphs"] == (4 if train else 2), s


def test_compiled_llama_over_eight_prompt_lengths_builds_four_programs():
    """bench/shapes.py's compiled sweep: the prompt lengths 5..33 are one exact graph (the first
    length) and the buckets 16, 32 and 64: four programs, with the logits of CPU."""
    ref = _hf("llama").eval()
    fwd = torch.compile(copy.deepcopy(ref).to("tpu"), backend="tpu")
    with torch.no_grad():
        for n in (5, 7, 9, 12, 16, 21, 27, 33):
            ids = torch.arange(1, n + 1).remainder(90).unsqueeze(0)
            assert_same(fwd(ids.to("tpu")).logits, ref(ids).logits, atol=1e-5, rtol=1e-4)
    s = tc.stats()
    assert s["partitions"] == 4 and s["bucketed_graphs"] == 3 and s["splits"] == {}, s


def test_generate_with_a_static_cache_and_automatic_dynamic_shapes():
    """transformers compiles the decode step with a static cache; with Dynamo's automatic
    dynamic shapes (compile_config dynamic=None; its default for tpu is dynamic=False) the
    cache's length is symbolic and bucketed: new prompt lengths in a bucket build no program."""
    from transformers import CompileConfig
    ref = _hf("llama").eval()
    model = copy.deepcopy(ref).to("tpu")
    config = CompileConfig(backend="tpu", dynamic=None, mode="default")
    built = []
    with torch.no_grad():
        for n in (5, 7, 9, 12):  # caches of n + 16: the bucket of 32 from the second on
            ids = torch.arange(3, n + 3).unsqueeze(0)
            kw = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0,
                      cache_implementation="static")
            got = model.generate(ids.to("tpu"), compile_config=config, **kw)
            assert torch.equal(got.cpu(), ref.generate(ids, **kw)), n
            built.append(tc.stats()["partitions"])
    assert built[3] == built[2] == built[1] and tc.stats()["bucketed_graphs"] >= 1, (built, tc.stats())


@pytest.mark.parametrize("name", ["qwen2", "phi", "gpt_neox", "opt", "gemma", "distilbert", "t5",
                                  "bart"])
def test_more_hugging_face_architectures_over_sequence_lengths(name):
    """More of transformers' architectures, eval with a padding mask (encoder-decoders with a
    decoder half as long): the logits of CPU, one program per bucket."""
    ref = _hf(name).eval()
    fwd = torch.compile(copy.deepcopy(ref).to("tpu"), backend="tpu")
    with torch.no_grad():
        for n in (5, 7, 9, 17, 20):
            ids = torch.randint(3, 99, (2, n), generator=torch.Generator().manual_seed(n))
            mask = torch.ones(2, n, dtype=torch.long)
            mask[1, :2] = 0
            kw = dict(input_ids=ids, attention_mask=mask)
            if name in ("t5", "bart"):
                kw["decoder_input_ids"] = ids[:, :max(2, n // 2)]
            got = fwd(**{k: v.to("tpu") for k, v in kw.items()}).logits
            assert_same(got, ref(**kw).logits, atol=1e-5, rtol=1e-4)
    s = tc.stats()
    assert s["bucket_refused"] == {} and s["bucketed_graphs"] == s["graphs"], s


def test_graphs_and_eager_follow_one_table_of_padding_rules():
    """Compiled graphs pad a call exactly where the op table's rule (csrc/ops/bucket.c) lets
    eager buckets pad it, with the fill it names: a convolution, pooling and nll_loss over a batch
    that changes and a mean over a padded dim run bucketed in both; a variance over a padded dim
    (its count) and an embedding's frequency-scaled gradient (padding would count as index 0)
    are refused by both, and stay equal to CPU."""
    import torch_pjrt
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    conv_t = copy.deepcopy(conv).to("tpu")

    def per_sample(img, target):
        h = (conv_t if img.device.type == "tpu" else conv)(img).relu()
        h = torch.nn.functional.max_pool2d(h, 2).mean((2, 3))
        return torch.nn.functional.cross_entropy(h, target, ignore_index=1)

    def make(n):
        g = torch.Generator().manual_seed(n)
        return [torch.randn(n, 3, 6, 6, generator=g), torch.randint(0, 4, (n,), generator=g)]
    with torch.no_grad():
        _sweep(per_sample, make)
        s = tc.stats()
        assert s["bucketed_graphs"] >= 1 and s["bucket_refused"] == {}, s
        torch_pjrt.reset_stats()
        for n in SIZES:  # the same calls in eager mode run bucketed too
            img, target = make(n)
            assert_same(per_sample(img.to("tpu"), target.to("tpu")), per_sample(img, target),
                        atol=1e-5, rtol=1e-5)
        assert torch_pjrt.stats()["bucketed_calls"] > 0

    torch.manual_seed(1)
    emb = nn.Embedding(8, 4, scale_grad_by_freq=True)
    emb_t = copy.deepcopy(emb).to("tpu")
    g = torch.compile(lambda ids, x: (emb_t(ids) * x).sum() + x.var(0).sum(), backend="tpu",
                      dynamic=True)
    for n in SIZES:
        ids = torch.arange(n) % 3  # index 0 among them: padding read as 0 would add to its count
        x = _x(n, 4, seed=n)
        emb.zero_grad(), emb_t.zero_grad()
        (emb(ids) * x).sum().backward()
        loss = g(ids.to("tpu"), x.to("tpu"))
        loss.backward()
        assert_same(loss, (emb(ids) * x).sum() + x.var(0).sum(), atol=1e-5, rtol=1e-5)
        assert_same(emb_t.weight.grad, emb.weight.grad, atol=1e-5, rtol=1e-5)
    reasons = " ".join(tc.stats()["bucket_refused"])
    assert "var:" in reasons and "embedding_dense_backward:" in reasons, reasons
