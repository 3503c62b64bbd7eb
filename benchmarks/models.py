"""Models for the benchmarks, in plain ``torch.nn`` / ``torch`` ops (no torchvision)."""

from __future__ import annotations

import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, seq_len: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", future.view(1, 1, seq_len, seq_len))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = self.n_heads
        q = self.q(x).view(b, t, h, c // h).transpose(1, 2)
        k = self.k(x).view(b, t, h, c // h).transpose(1, 2)
        v = self.v(x).view(b, t, h, c // h).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        att = att.masked_fill(self.mask, float("-inf"))  # seq len t == the mask's
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, seq_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, seq_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.fc_out(self.act(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-style decoder: token + position embeddings, ``n_layers`` blocks, LM head."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, n_layers: int, seq_len: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, seq_len) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class MLP(nn.Module):
    """``n_blocks`` residual blocks of Linear -> GELU."""

    def __init__(self, width: int, n_blocks: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(n_blocks))
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + self.act(layer(x))
        return x


def gpt(quick: bool = False) -> tuple[nn.Module, torch.Tensor]:
    """The GPT model (eval mode) and a batch of token ids."""
    vocab, d, heads, layers, seq, batch = (
        (100, 32, 2, 2, 16, 2) if quick else (1000, 256, 4, 12, 128, 4)
    )
    model = GPT(vocab, d, heads, layers, seq).eval()
    return model, torch.randint(0, vocab, (batch, seq))


def mlp(quick: bool = False) -> tuple[nn.Module, torch.Tensor]:
    """The MLP model (eval mode) and a batch of inputs."""
    width, blocks, batch = (32, 10, 8) if quick else (256, 200, 64)
    return MLP(width, blocks).eval(), torch.randn(batch, width)
