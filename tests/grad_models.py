"""Real-shaped models for the gradient tests: a small GPT-style decoder and a CNN with
BatchNorm (train mode), in plain ``torch.nn``."""

from __future__ import annotations

import math

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, seq: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = torch.softmax(att.masked_fill(self.mask, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, seq: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, seq)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """Token + position embeddings, two pre-norm blocks, an LM head."""

    def __init__(self, vocab: int = 50, d: int = 32, heads: int = 4, layers: int = 2, seq: int = 8):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("positions", torch.arange(seq))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(self.positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class SmallCNN(nn.Module):
    """Conv-BN-ReLU stem, one residual block, global pooling, a classifier."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv1, self.bn1 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(x + self.bn2(self.conv2(y)))
        return self.fc(x.mean(dim=(2, 3)))


def gpt_case() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The GPT in train mode (no dropout), token ids and next-token targets."""
    torch.manual_seed(0)
    idx = torch.randint(0, 50, (3, 8))
    return TinyGPT().train(), idx, torch.randint(0, 50, (3, 8))


def cnn_case() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The CNN in train mode (BatchNorm uses batch statistics), images and labels."""
    torch.manual_seed(0)
    return SmallCNN().train(), torch.randn(4, 3, 10, 10), torch.randint(0, 5, (4,))
