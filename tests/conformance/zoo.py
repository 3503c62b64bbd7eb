"""The conformance zoo: small third-party architectures with random weights (no downloads),
one function a model returning ``(model, args, kwargs)``, plus the project's own models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from tests.any_model.models import Detector, Forked, ValueIf

Case = tuple[nn.Module, tuple[Any, ...], dict[str, Any]]
VOCAB = 96
SEQ = 6


def _ids(batch: int = 1, seq: int = SEQ) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, seq))


def _seq2seq_inputs() -> dict[str, torch.Tensor]:
    """An encoder-decoder's keyword inputs: source ids, their mask, three decoder ids."""
    ids = _ids()
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "decoder_input_ids": _ids(seq=3),
    }


def _lm(config_cls: str, model_cls: str, **config: Any) -> Case:
    """A causal language model called with keyword inputs; its output holds a cache."""
    import transformers as tf

    base = {
        "vocab_size": VOCAB,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
        "pad_token_id": 0,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }
    cfg = getattr(tf, config_cls)(**{**base, **config})
    model = getattr(tf, model_cls)(cfg).eval()
    ids = _ids()
    return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def gpt2() -> Case:
    import transformers as tf

    cfg = tf.GPT2Config(
        vocab_size=VOCAB, n_layer=2, n_embd=32, n_head=2, n_positions=32, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    ids = _ids()
    return (
        tf.GPT2LMHeadModel(cfg).eval(),
        (),
        {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
    )


def llama() -> Case:
    return _lm("LlamaConfig", "LlamaForCausalLM")


def mistral() -> Case:
    return _lm("MistralConfig", "MistralForCausalLM", sliding_window=None)


def qwen3() -> Case:
    return _lm("Qwen3Config", "Qwen3ForCausalLM", head_dim=8)


def phi3() -> Case:
    return _lm("Phi3Config", "Phi3ForCausalLM")


def gemma3() -> Case:
    return _lm(
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        head_dim=8,
        sliding_window=4,
        query_pre_attn_scalar=8,
    )


def mixtral() -> Case:
    return _lm("MixtralConfig", "MixtralForCausalLM", num_local_experts=4, num_experts_per_tok=2)


def qwen3_moe() -> Case:
    return _lm(
        "Qwen3MoeConfig", "Qwen3MoeForCausalLM", head_dim=8, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32,
    )  # fmt: skip


def mamba() -> Case:
    import transformers as tf

    cfg = tf.MambaConfig(
        vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2
    )
    return tf.MambaForCausalLM(cfg).eval(), (), {"input_ids": _ids()}


def t5() -> Case:
    import transformers as tf

    cfg = tf.T5Config(
        vocab_size=VOCAB, d_model=32, d_ff=64, d_kv=8, num_layers=1, num_decoder_layers=1,
        num_heads=2, decoder_start_token_id=0,
    )  # fmt: skip
    inputs = _seq2seq_inputs()  # drawn before the weights are made
    return tf.T5ForConditionalGeneration(cfg).eval(), (), inputs


def bart() -> Case:
    import transformers as tf

    cfg = tf.BartConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
    )  # fmt: skip
    inputs = _seq2seq_inputs()  # drawn before the weights are made
    return tf.BartForConditionalGeneration(cfg).eval(), (), inputs


def bert() -> Case:
    import transformers as tf

    cfg = tf.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32,
    )  # fmt: skip
    ids = _ids()
    return tf.BertModel(cfg).eval(), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def vit() -> Case:
    import transformers as tf

    cfg = tf.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, num_labels=3,
    )  # fmt: skip
    return tf.ViTForImageClassification(cfg).eval(), (), {"pixel_values": torch.randn(1, 3, 16, 16)}


def swin() -> Case:
    import transformers as tf

    cfg = tf.SwinConfig(
        image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, num_labels=3,
    )  # fmt: skip
    return (
        tf.SwinForImageClassification(cfg).eval(),
        (),
        {"pixel_values": torch.randn(1, 3, 32, 32)},
    )


def wav2vec2() -> Case:
    import transformers as tf

    cfg = tf.Wav2Vec2Config(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2,
    )  # fmt: skip
    return tf.Wav2Vec2ForCTC(cfg).eval(), (), {"input_values": torch.randn(1, 400)}


def _text_vision(tf: Any, text_cls: str, vision_cls: str) -> tuple[dict, dict]:
    text = {
        "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 2, "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 1,
    }  # fmt: skip
    vision = {
        "image_size": 16, "patch_size": 4, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 1, "num_attention_heads": 2,
    }  # fmt: skip
    return text, vision


def clip() -> Case:
    import transformers as tf

    text, vision = _text_vision(tf, "CLIPTextConfig", "CLIPVisionConfig")
    cfg = tf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    ids = _ids(batch=2)
    kwargs = {
        "input_ids": ids,
        "pixel_values": torch.randn(1, 3, 16, 16),
        "attention_mask": torch.ones_like(ids),
    }
    return tf.CLIPModel(cfg).eval(), (), kwargs


def siglip() -> Case:
    import transformers as tf

    text, vision = _text_vision(tf, "SiglipTextConfig", "SiglipVisionConfig")
    cfg = tf.SiglipConfig(text_config=text, vision_config=vision)
    kwargs = {"input_ids": _ids(batch=2), "pixel_values": torch.randn(1, 3, 16, 16)}
    return tf.SiglipModel(cfg).eval(), (), kwargs


def llava() -> Case:
    import transformers as tf

    vision = tf.CLIPVisionConfig(
        image_size=16, patch_size=4, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2,
    )  # fmt: skip
    text = tf.LlamaConfig(
        vocab_size=VOCAB + 4, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    cfg = tf.LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=VOCAB, image_seq_length=16,
        vision_feature_layer=-1,
    )  # fmt: skip
    ids = torch.cat([torch.full((1, 16), VOCAB), _ids()], dim=1)
    kwargs = {
        "input_ids": ids,
        "pixel_values": torch.randn(1, 3, 16, 16),
        "attention_mask": torch.ones_like(ids),
    }
    return tf.LlavaForConditionalGeneration(cfg).eval(), (), kwargs


def detr() -> Case:
    import transformers as tf

    cfg = tf.DetrConfig(
        use_timm_backbone=False, use_pretrained_backbone=False, backbone="resnet-18",
        backbone_config=tf.ResNetConfig(
            embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"]
        ),
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5,
        num_labels=3,
    )  # fmt: skip
    return tf.DetrForObjectDetection(cfg).eval(), (), {"pixel_values": torch.randn(1, 3, 32, 32)}


def unet2d() -> Case:
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
        attention_head_dim=8, norm_num_groups=8,
    )  # fmt: skip
    kwargs = {
        "sample": torch.randn(1, 4, 8, 8),
        "timestep": torch.tensor([3]),
        "encoder_hidden_states": torch.randn(1, 5, 16),
    }
    return model.eval(), (), kwargs


def deepseek_v3() -> Case:
    """Multi-head latent attention (keys built in ``new_empty`` memory, part by part) and
    grouped top-k routing over routed and shared experts."""
    return _lm(
        "DeepseekV3Config", "DeepseekV3ForCausalLM", moe_intermediate_size=16, n_routed_experts=4,
        n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1, kv_lora_rank=16,
        q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
        first_k_dense_replace=1, num_key_value_heads=4,
    )  # fmt: skip


def jamba() -> Case:
    """Mamba layers and attention layers in turn, with a mixture of experts every other
    layer (its scan takes ``associative_scan`` only when compiling)."""
    return _lm(
        "JambaConfig", "JambaForCausalLM", num_experts=4, num_experts_per_tok=2,
        expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
        mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4,
    )  # fmt: skip


def vae() -> Case:
    """diffusers' AutoencoderKL: a convolutional encoder, a Gaussian posterior whose mode it
    decodes (``torch.chunk`` into mean and log-variance: the latter gets no gradient)."""
    from diffusers import AutoencoderKL

    model = AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), block_out_channels=(8, 16),
        layers_per_block=1, latent_channels=4, norm_num_groups=4, sample_size=16,
    )  # fmt: skip
    return model.eval(), (), {"sample": torch.randn(1, 3, 16, 16)}


# -- the project's own models: data-dependent control flow, forks, tensors in plain lists --
def value_if() -> Case:
    return ValueIf(), (torch.randn(2, 4),), {}


def detector() -> Case:
    torch.manual_seed(1)  # seed 1: two boxes pass the score
    return Detector(), (torch.randn(6, 8),), {}


def forked() -> Case:
    return Forked(), (torch.randn(2, 4),), {}


class AnchorGenerator(nn.Module):
    """torchvision-style: cell anchors kept as tensors in a plain Python list attribute
    (not buffers), moved to the feature's device at run time."""

    def __init__(self, sizes: tuple[int, ...] = (4, 8)) -> None:
        super().__init__()
        self.cell_anchors = [torch.tensor([[-s, -s, s, s]], dtype=torch.float32) for s in sizes]

    def forward(self, feature: torch.Tensor) -> torch.Tensor:
        h, w = feature.shape[-2:]
        ys = torch.arange(h, dtype=torch.float32, device=feature.device)
        xs = torch.arange(w, dtype=torch.float32, device=feature.device)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        shifts = torch.stack([grid_x, grid_y, grid_x, grid_y], dim=-1).reshape(-1, 1, 4)
        # as torchvision's set_cell_anchors: the list attribute is replaced by moved copies
        self.cell_anchors = [a.to(feature.device, feature.dtype) for a in self.cell_anchors]
        anchors = [shifts + a for a in self.cell_anchors]
        return torch.cat(anchors, dim=1).reshape(-1, 4)


class AnchorDetector(nn.Module):
    """A detection-style model with a torchvision-like anchor generator and box head."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.anchors = AnchorGenerator()
        self.box = nn.Conv2d(8, 8, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        feature = self.backbone(images).relu()
        anchors = self.anchors(feature)
        deltas = self.box(feature).permute(0, 2, 3, 1).reshape(feature.shape[0], -1, 4)
        return anchors.unsqueeze(0) + deltas


def anchor_detector() -> Case:
    return AnchorDetector().eval(), (torch.randn(1, 3, 8, 8),), {}


ZOO: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        gpt2, llama, mistral, qwen3, phi3, gemma3, mixtral, qwen3_moe, mamba, t5, bart, bert,
        vit, swin, wav2vec2, clip, siglip, llava, detr, unet2d,
        deepseek_v3, jamba, vae,
        value_if, detector, forked, anchor_detector,
    )
}  # fmt: skip
THIRD_PARTY = [
    name for name in ZOO if name not in {"value_if", "detector", "forked", "anchor_detector"}
]


def build(name: str) -> Case:
    """A fresh model of that name and its inputs (seeded: the same weights every call)."""
    torch.manual_seed(0)
    return ZOO[name]()
