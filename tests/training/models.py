"""Small training setups with real NaN sources, shared by the training tests (and the
fresh process that replays a saved incident)."""

from __future__ import annotations

import torch
from torch import nn


class LogNet(nn.Module):
    """An MLP with dropout whose output goes through ``log``: a batch whose first feature
    is very negative takes the log of a negative number (NaN in the forward pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.relu(self.fc1(x)))
        return torch.log(self.fc2(h).abs() + x[:, :1])


class NormNet(nn.Module):
    """Adds the norm (written out: square root of the sum of squares) of the hidden units
    of the rows whose gate is on: when no gate is on it is the norm of a zero vector,
    finite forward (0) but not backward (the square root's slope at 0 is infinite)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.relu(self.fc1(x)))
        gated = h * (x[:, 1:2] > 0)
        return self.fc2(h) + torch.sqrt((gated**2).sum())


def batches(
    n: int, bad: int | None, kind: str = "log", seed: int = 0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n`` batches of 8 rows; batch ``bad`` triggers the model's NaN."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        x = torch.rand(8, 4, generator=g) + 0.1
        y = torch.rand(8, 1, generator=g)
        if i == bad:
            x = x.clone()
            if kind == "log":
                x[:, 0] = -1e3
            else:
                x[:, 1] = -1.0
        out.append((x, y))
    return out


def setup(kind: str = "log", seed: int = 0, lr: float = 1e-2):
    """A model, its AdamW optimizer and a train step that records its outputs."""
    torch.manual_seed(seed)
    model = LogNet() if kind == "log" else NormNet()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    outputs: list[torch.Tensor] = []

    def train_step(batch):
        x, y = batch
        opt.zero_grad()
        out = model(x)
        outputs.append(out.detach().clone())
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return model, opt, train_step, outputs


def run_until_incident(step, data):
    """Call ``step`` on each batch until it raises NonFiniteStep; its incident (or fail)."""
    import fxviz

    for b in data:
        try:
            step(b)
        except fxviz.NonFiniteStep as e:
            return e.incident
    raise AssertionError("the watch raised no NonFiniteStep")
