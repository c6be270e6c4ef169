"""A Lightning fit as a user writes it: `lightning_fit.py NAMESPACE ACCELERATOR DEVICES PRECISION
OUT`. Trains a small regression model for 2 epochs with the Trainer, saves a checkpoint, loads
it back on CPU, and (on global rank 0) writes OUT as JSON: the accelerator, strategy and device
Lightning chose, each step's loss, the final weights and whether the checkpoint loaded on CPU
holds them. With DEVICES > 1 Lightning launches the other ranks by running this script again."""
import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

ns, accelerator, devices, precision, out = sys.argv[1:6]
if ns == "pytorch_lightning":
    import pytorch_lightning as L
else:
    import lightning.pytorch as L


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
        self.losses = []

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x).float(), y)
        self.log("loss", loss)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.05)


g = torch.Generator().manual_seed(0)
x = torch.randn(64, 8, generator=g)
y = (x * torch.arange(8.)).sum(1, keepdim=True)
L.seed_everything(0)
model = Regressor()
trainer = L.Trainer(accelerator=accelerator, devices=int(devices) if devices != "auto" else "auto",
                    precision=precision, max_epochs=2, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False,
                    default_root_dir=out + ".d")
trainer.fit(model, DataLoader(TensorDataset(x, y), batch_size=16))
ckpt = out + ".ckpt"
trainer.save_checkpoint(ckpt)
if trainer.global_rank == 0:
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    loaded = Regressor.load_from_checkpoint(ckpt, map_location="cpu")
    on_cpu = all(p.device.type == "cpu" for p in loaded.parameters())
    same = all(torch.equal(v, weights[k]) for k, v in loaded.state_dict().items())
    json.dump({"accelerator": type(trainer.accelerator).__name__,
               "strategy": type(trainer.strategy).__name__,
               "device": str(trainer.strategy.root_device),
               "world_size": trainer.world_size,
               "losses": model.losses,
               "weights": {k: v.float().flatten().tolist() for k, v in weights.items()},
               "checkpoint_on_cpu": on_cpu and same}, open(out, "w"))
