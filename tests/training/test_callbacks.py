"""The Hugging Face Trainer and Lightning callbacks, with the real libraries."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from tests.training.models import LogNet, batches


class _Rows(torch.utils.data.Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class _HFNet(nn.Module):
    """A plain module the way the Trainer calls models: keywords in, ``{"loss": ...}`` out."""

    def __init__(self):
        super().__init__()
        self.net = LogNet()

    def forward(self, x, labels):
        return {"loss": ((self.net(x) - labels) ** 2).mean()}


@pytest.mark.slow
def test_hf_trainer_stops_at_the_bad_step(tmp_path):
    pytest.importorskip("accelerate")
    from transformers import Trainer, TrainingArguments

    from fxviz._training.hf import FxvizCallback

    torch.manual_seed(0)
    model = _HFNet()
    rows = []
    for x, y in batches(4, 2):  # 8 rows a batch; batch 2 is bad
        rows += [{"x": x[j], "labels": y[j]} for j in range(8)]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_train_epochs=1,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        max_grad_norm=0.0,
        disable_tqdm=True,
    )
    callback = FxvizCallback()
    trainer = Trainer(model=model, args=args, train_dataset=_Rows(rows), callbacks=[callback])
    trainer.get_train_dataloader = _in_order(trainer, rows)
    with pytest.raises(fxviz.NonFiniteStep) as caught:
        trainer.train()
    incident = caught.value.incident
    assert (incident.step, incident.what) == (2, "gradient")
    assert "net.fc1.weight" in incident.names
    for name, p in model.named_parameters():  # the bad update was not applied
        assert torch.equal(p, incident.snapshot.params[name])
    rec = incident.replay()
    # the Trainer's model is captured as one graph (symbolic tracing refuses what the
    # Trainer attaches to it; torch.export takes it, its output's NaN loss the model's
    # own), whose nodes keep their own names
    assert rec.first_nonfinite().name == "log"
    assert rec.method in ("symbolic", "export", "dynamo")


def _in_order(trainer, rows):
    """The Trainer's loader without shuffling, so that batch 2 is the bad one."""
    from torch.utils.data import DataLoader

    def loader():
        return trainer.accelerator.prepare(
            DataLoader(_Rows(rows), batch_size=8, shuffle=False, collate_fn=trainer.data_collator)
        )

    return loader


@pytest.mark.slow
def test_lightning_stops_at_the_bad_step():
    pl = pytest.importorskip("lightning.pytorch")
    from fxviz._training.lightning import FxvizCallback

    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = LogNet()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return ((self.net(x) - y) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    torch.manual_seed(0)
    lit = Lit()
    callback = FxvizCallback()
    trainer = pl.Trainer(
        max_epochs=1,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    data = batches(6, 3)
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    with pytest.raises(fxviz.NonFiniteStep) as caught:
        trainer.fit(lit, loader)
    incident = caught.value.incident
    assert (incident.step, incident.what) == (3, "loss")
    for name, p in lit.named_parameters():
        assert torch.equal(p, incident.snapshot.params[name])
    rec = incident.replay()
    assert rec.first_nonfinite().name == "log"
    assert torch.equal(rec["x"].value, data[3][0])
