"""Models one graph cannot hold, built small (no downloaded weights)."""

from __future__ import annotations

import torch
from torch import nn


class ValueIf(nn.Module):
    """A Python ``if`` on a tensor's value."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        if h.sum() > 0:
            return self.b(h).relu()
        return self.b(-h)


class BoxHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, feature: torch.Tensor, score: float) -> torch.Tensor:
        return self.fc(feature).sigmoid() * score


class Detector(nn.Module):
    """Detection-style: a data-dependent number of boxes, a Python loop over them."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(8, 8)
        self.score = nn.Linear(8, 1)
        self.head = BoxHead()

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        feats = self.backbone(feats).relu()
        scores = self.score(feats).squeeze(-1)
        keep = torch.nonzero(scores > 0).flatten()
        boxes = []
        for i in keep.tolist():
            boxes.append(self.head(feats[i], scores[i].item()))
        if not boxes:
            return feats.new_zeros(0, 4)
        return torch.stack(boxes)


class Branch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).tanh()


class Forked(nn.Module):
    """Eager model that forks an nn.Module and a scripted submodule, then waits on both."""

    def __init__(self) -> None:
        super().__init__()
        self.eager = Branch()
        self.scripted = torch.jit.script(Branch())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.jit.fork(self.eager, x)
        b = torch.jit.fork(self.scripted, x)
        return torch.jit.wait(a) + torch.jit.wait(b)


def hugging_face(kind: str) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A tiny Hugging Face model with its default config, and keyword inputs for it."""
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, 100, (1, 8))
    mask = torch.ones(1, 8, dtype=torch.long)
    small = {"vocab_size": 100}
    if kind == "gpt2":
        config = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=32, **small)
        config.bos_token_id = config.eos_token_id = 0
        return tf.GPT2LMHeadModel(config).eval(), {"input_ids": ids, "attention_mask": mask}
    if kind == "bert":
        config = tf.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=32, **small,
        )  # fmt: skip
        return tf.BertModel(config).eval(), {"input_ids": ids, "attention_mask": mask}
    if kind == "t5":
        config = tf.T5Config(
            d_model=32, d_ff=64, d_kv=16, num_layers=1, num_decoder_layers=1, num_heads=2,
            decoder_start_token_id=0, **small,
        )  # fmt: skip
        decoder = torch.randint(0, 100, (1, 4))
        return tf.T5ForConditionalGeneration(config).eval(), {
            "input_ids": ids,
            "attention_mask": mask,
            "decoder_input_ids": decoder,
        }
    if kind == "llama":
        config = tf.LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=32, **small,
        )  # fmt: skip
        config.bos_token_id = config.eos_token_id = 0
        return tf.LlamaForCausalLM(config).eval(), {"input_ids": ids, "attention_mask": mask}
    raise ValueError(kind)
