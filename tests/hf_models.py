"""Small Hugging Face models (random weights, tiny configs, no downloads), exported once a
session and shared by the tests that need real architectures."""

from __future__ import annotations

import functools
import warnings

import torch
from torch import nn

VOCAB = 100
SEQ = 8
NAMES = ("gpt2", "bert", "t5", "llama")


class _T5Positional(nn.Module):
    """T5 takes its decoder inputs by keyword; this takes both positionally for export."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids)
        return out.last_hidden_state


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A fresh small model of that family and its inputs."""
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (1, SEQ))
    small = {"vocab_size": VOCAB, "use_cache": False}
    if name == "gpt2":
        config = tf.GPT2Config(
            n_layer=2, n_embd=64, n_head=2, n_positions=32, bos_token_id=0, eos_token_id=0,
            **small,
        )  # fmt: skip
        return tf.GPT2LMHeadModel(config).eval(), (ids,)
    if name == "bert":
        config = tf.BertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
            max_position_embeddings=32, vocab_size=VOCAB,
        )  # fmt: skip
        return tf.BertModel(config).eval(), (ids,)
    if name == "t5":
        config = tf.T5Config(num_layers=2, d_model=64, d_kv=32, d_ff=128, num_heads=2, **small)
        return _T5Positional(tf.T5Model(config).eval()), (ids, ids)
    if name == "llama":
        config = tf.LlamaConfig(
            num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=2,
            num_key_value_heads=2, max_position_embeddings=32, **small,
        )  # fmt: skip
        return tf.LlamaForCausalLM(config).eval(), (ids,)
    raise ValueError(name)


@functools.cache
def exported(name: str) -> tuple[torch.export.ExportedProgram, tuple[torch.Tensor, ...]]:
    """The model exported with ``torch.export`` (cached for the session) and its inputs."""
    model, inputs = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(model, inputs), inputs


def rwkv() -> tuple[nn.Module, torch.Tensor]:
    """A 2-layer RWKV language model (it writes its recurrent state in place after autograd
    saved it: its backward pass fails in eager PyTorch too) and four token ids."""
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.RwkvConfig(
        vocab_size=32, context_length=8, hidden_size=16, num_hidden_layers=2,
        attention_hidden_size=16, intermediate_size=32,
    )  # fmt: skip
    return tf.RwkvForCausalLM(cfg).eval(), torch.randint(0, 32, (1, 4))
