"""A small Hugging Face Trainer fine-tune, written as for CUDA: no device named anywhere, the
Trainer and Accelerate pick the accelerator. Usage: hf_trainer_finetune.py tpu|cpu '{extra
TrainingArguments as JSON}' OUTPUT_DIR. Prints one JSON line: devices, per-step losses, the ops
that fell back to CPU."""
import json, sys, torch, torch_pjrt
from transformers import (LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments, set_seed)
use_cpu = sys.argv[1] == "cpu"
extra = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
set_seed(0)
cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(cfg)
g = torch.Generator().manual_seed(0)
data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (48, 12), generator=g)]
args = TrainingArguments(output_dir=sys.argv[3], max_steps=6,
                         per_device_train_batch_size=8, learning_rate=1e-3, logging_steps=1,
                         report_to=[], save_strategy="no", use_cpu=use_cpu, seed=0,
                         dataloader_num_workers=0, disable_tqdm=True, **extra)
torch_pjrt.reset_stats()
tr = Trainer(model=model, args=args, train_dataset=data)
tr.train()
losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
print(json.dumps({"device": str(args.device), "model_device": str(next(model.parameters()).device),
                  "losses": losses, "fallbacks": torch_pjrt.stats()["fallbacks"], "optim": str(args.optim)}))
