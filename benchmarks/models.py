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


class SmallBlock(nn.Module):
    """A block of ~9 nodes in one module: stacks of them make the widget's big graphs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.n = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x)) * 2 + 1
        return self.n(x + torch.tanh(self.b(h)) - 0.5)


def small_blocks(n: int) -> nn.Sequential:
    """``n`` :class:`SmallBlock` in a row (5,500 trace to ~50,000 nodes)."""
    return nn.Sequential(*[SmallBlock() for _ in range(n)])


class Branches(nn.Module):
    """``width`` stacks of ``depth`` :class:`SmallBlock` side by side, summed: a big graph
    about as wide as it is tall (drawn whole, it gets the widget's overview)."""

    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.branches = nn.ModuleList(small_blocks(depth) for _ in range(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([branch(x) for branch in self.branches]).sum(0)


def mlp(quick: bool = False) -> tuple[nn.Module, torch.Tensor]:
    """The MLP model (eval mode) and a batch of inputs."""
    width, blocks, batch = (32, 10, 8) if quick else (256, 200, 64)
    return MLP(width, blocks).eval(), torch.randn(batch, width)


class RMSNorm(nn.Module):
    """``x * rsqrt(mean(x²) + eps) * weight``, as in Llama."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor, half: int) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the last dim; ``half`` is given, as a traced
    ``x.shape[-1] // 2`` would add three nodes a call."""
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Causal self-attention with rotary position embeddings (plain matmul + mask)."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        b, t, c = x.shape
        shape = (b, t, self.n_heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q = q * cos + rotate_half(q, self.head_dim // 2) * sin
        k = k * cos + rotate_half(k, self.head_dim // 2) * sin
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = torch.softmax(att + mask, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden, bias=False)
        self.up_proj = nn.Linear(d_model, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d_model, bias=False)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.input_norm = RMSNorm(d_model)
        self.attn = LlamaAttention(d_model, n_heads)
        self.post_attn_norm = RMSNorm(d_model)
        self.mlp = LlamaMLP(d_model, hidden)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x), cos, sin, mask)
        return x + self.mlp(self.post_attn_norm(x))


class Llama(nn.Module):
    """A Llama-style decoder: RMSNorm, rotary embeddings, SwiGLU MLP, untied LM head.

    The 7B configuration is ``Llama()``; build it on the meta device
    (``with torch.device("meta"): Llama()``): its 6.7e9 fp32 parameters take 27 GB.
    """

    def __init__(
        self,
        vocab: int = 32000,
        d_model: int = 4096,
        n_heads: int = 32,
        n_layers: int = 32,
        hidden: int = 11008,
        max_seq: int = 2048,
        theta: float = 10000.0,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(LlamaBlock(d_model, n_heads, hidden) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        head_dim = d_model // n_heads
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_seq).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)  # (max_seq, head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        future = torch.full((max_seq, max_seq), float("-inf")).triu(1)
        self.register_buffer("mask", future, persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        # torch.narrow, not self.cos[:t]: symbolic tracing cannot slice a tensor by a Proxy.
        cos, sin = torch.narrow(self.cos, 0, 0, t), torch.narrow(self.sin, 0, 0, t)
        mask = torch.narrow(torch.narrow(self.mask, 0, 0, t), 1, 0, t)
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def llama(quick: bool = False) -> tuple[nn.Module, torch.Tensor]:
    """A Llama-7B-style decoder built on the meta device, and meta token ids (1 × 2048).

    ``quick``: 2 layers, width 64, 64 tokens (still on the meta device).
    """
    cfg = (
        {"vocab": 1000, "d_model": 64, "n_heads": 4, "n_layers": 2, "hidden": 176, "max_seq": 64}
        if quick
        else {}
    )
    with torch.device("meta"):
        model = Llama(**cfg).eval()
    seq = cfg.get("max_seq", 2048)
    return model, torch.empty(1, seq, dtype=torch.long, device="meta")


def hf_gpt2(quick: bool = False) -> tuple[nn.Module, torch.Tensor]:
    """A Hugging Face ``GPT2LMHeadModel`` from a small config (random weights, nothing
    downloaded; eval mode, no KV cache) and a batch of token ids. Needs ``transformers``."""
    import transformers

    vocab, batch, seq = (100, 1, 8) if quick else (1000, 4, 64)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=2, n_positions=128, vocab_size=vocab, use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval(), torch.randint(0, vocab, (batch, seq))
