"""What each cell of the conformance matrix is expected to do: pass, refuse with one
documented message, or fail for a known bug another branch fixes (``KNOWN``: one table,
flipped by the lead after merging)."""

from __future__ import annotations

import re
from importlib import metadata

from fxviz.errors import FxvizError
from tests.conformance.zoo import ZOO


def _transformers_before(version: tuple[int, int]) -> bool:
    try:
        found = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return False
    return tuple(int(p) for p in re.findall(r"\d+", found)[:2]) < version


# Whether transformers' masks differ between a capture and eager (see REFUSALS below)
CAPTURED_MASKS_DIFFER = _transformers_before((5, 24))

# The fast core (make test): every verb on every kind for these; all models x record.
QUICK_MODELS = ("value_if", "llama", "vit", "anchor_detector")

# Models called with keyword inputs only (every Hugging Face and diffusers model here).
KEYWORD_ONLY = frozenset(
    {"gpt2", "llama", "mistral", "qwen3", "phi3", "gemma3", "mixtral", "qwen3_moe", "mamba",
     "t5", "bart", "bert", "vit", "swin", "wav2vec2", "clip", "siglip", "llava", "detr", "unet2d",
     "deepseek_v3", "jamba", "vae"}
)  # fmt: skip
DATA_DEPENDENT = frozenset({"value_if", "detector"})

RUNS = ("record", "debugger", "backward", "shapes_real", "shapes_fake", "shapes_meta")
DRAWS = ("to_dot", "report")
ALL = "*"

# (model or *, kind or *, verb or *) -> the one message a refusal must carry (a regex).
REFUSALS: dict[tuple[str, str, str], str] = {}
for _name in ZOO:
    if _name not in ("anchor_detector",):  # HF forwards, tensor conditions, forks
        REFUSALS[(_name, "symbolic", ALL)] = r"torch\.fx\.symbolic_trace could not capture"
    if _name in DATA_DEPENDENT:
        REFUSALS[(_name, "export", ALL)] = r"torch\.export\.export could not capture"
for _verb in (*RUNS[1:], "compare_pass", "diff"):
    # a file holds values, not a model: nothing to run again (its record is itself, and
    # saving it again is a cell of its own)
    REFUSALS[(ALL, "loaded", _verb)] = r"a loaded recording holds no model to run"
for _verb in ("compare_pass", "diff"):
    # a joint graph holds two graphs: these verbs take one
    REFUSALS[(ALL, "joint", _verb)] = r"a JointGraph holds two graphs: pass joint\.forward"
# a file holds one recording: the two passes are saved one by one
REFUSALS[(ALL, "joint", "save_load")] = r"save each pass, jrec\.forward\.save"
for _name in (*DATA_DEPENDENT, "anchor_detector", "llava"):
    # tensor-valued Python between graphs (Llava's Dynamo capture breaks its graph three
    # times): AOTAutograd needs one graph of the model
    REFUSALS[(_name, "joint", ALL)] = (
        r"AOTAutograd could not capture|method='joint' needs one graph of"
    )
# AOTAutograd's own forward graph of diffusers' AutoencoderKL runs native_group_norm on a
# tensor that is not contiguous (torch 2.13: aot_function on the eager model fails alike)
REFUSALS[("vae", "joint", ALL)] = (
    r"(?s)AOTAutograd could not capture AutoencoderKL: Expected X\.is_contiguous.*"
    r"What to do: record the gradients of one run instead"
)
# forward assigns an attribute (torchvision-style anchors): a traced graph cannot hold that
REFUSALS[("anchor_detector", "symbolic", ALL)] = r"Detector\.forward changes the model"
# torch.jit.fork of a scripted module: torch.export cannot call it
REFUSALS[("forked", "export", ALL)] = r"torch\.export\.export could not capture Forked"
# .item() and nonzero need values that fake and meta runs do not have
for _kind in ("dynamo", "real"):
    for _verb in ("shapes_fake", "shapes_meta"):
        REFUSALS[("detector", _kind, _verb)] = (
            r"In mode='(fake|meta)' this op needs the tensor's values .*use mode='real'"
        )

# Llava's exported graph checks its image tokens against the image features as it runs
# (aten.item of _is_all_true, then runtime asserts): fake and meta runs have no values
for _verb in ("shapes_fake", "shapes_meta"):
    REFUSALS[("llava", "export", _verb)] = (
        r"In mode='(fake|meta)' this op needs the tensor's values .*use mode='real'"
    )

# torch's fake/meta kernel of aten._grouped_mm (transformers' MoE experts, as one real run
# records them) takes bfloat16 only, while the CPU kernel runs float32
for _verb in ("shapes_fake", "shapes_meta"):
    for _name in ("qwen3_moe", "mixtral", "deepseek_v3", "jamba"):
        REFUSALS[(_name, "real", _verb)] = r"In mode='(fake|meta)' this op has no .*mode='real'"

# Before transformers 5.24, under Dynamo transformers built an explicit causal mask
# (masking_utils asked is_torchdynamo_compiling()) where eager has SDPA skip it
# (is_causal=True): the output was bitwise eager's, the gradients were not, and the
# library could not trace eager's branch (it reads the mask's values): the capture's
# backward pass is refused (record(model, backward=) with method "auto" records one real
# run). (torch.export: it asked is_exporting() and saw fake tensors, so the mask was built
# too.) From 5.24 these captures' gradients are eager's (checked: every parameter's), and
# their backward cells pass.
for _name in ("llama", "mistral", "qwen3", "phi3", "mixtral", "qwen3_moe", "jamba"):
    if not CAPTURED_MASKS_DIFFER:
        break
    REFUSALS[(_name, "dynamo", "backward")] = (
        r"the gradients of this Dynamo capture are not eager's .*masking_utils\.py"
    )
    REFUSALS[(_name, "export", "backward")] = (
        r"the gradients of this export capture are not eager's .*is_exporting\(\)"
    )

# Cells that are not cells: the verb does not take what that kind gives.
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    (k, "compare_dtype"): "compare_dtype takes the model and captures it itself: one cell a "
    "model, in the dynamo column"
    for k in ("symbolic", "export", "real", "joint", "loaded")
}

# Known bugs another branch fixes: (model or *, kind or *, verb or *) -> reason. ONE table:
# the lead flips these after merging (strict xfail: a cell that passes fails the run).
KNOWN: dict[tuple[str, str, str], str] = {}  # none open: every cell passes or refuses


# Cells the wide rules above cover that pass already (positional inputs, no 0-d tensor).
PASSING = frozenset(
    {("anchor_detector", kind, "compare_pass") for kind in ("export", "dynamo", "real")}
    | {("anchor_detector", "dynamo", "compare_dtype")}
)


def _lookup(table: dict[tuple[str, str, str], str], name: str, kind: str, verb: str) -> str | None:
    for key in (
        (name, kind, verb), (name, kind, ALL), (name, ALL, verb), (ALL, kind, verb),
        (ALL, ALL, verb), (ALL, kind, ALL),
    ):  # fmt: skip
        if key in table:
            return table[key]
    return None


def expectation(name: str, kind: str, verb: str) -> tuple[str, str]:
    """``("pass" | "refused" | "xfail" | "n/a", message or reason)``."""
    if (kind, verb) in NOT_APPLICABLE:
        return "n/a", NOT_APPLICABLE[(kind, verb)]
    if (name, kind, verb) in PASSING:
        return "pass", ""
    refusal = _lookup(REFUSALS, name, kind, verb)
    if refusal is not None and (name, kind, ALL) in REFUSALS:
        return "refused", refusal  # the row's capture refuses: every cell says so
    known = _lookup(KNOWN, name, kind, verb)
    if known is not None:
        return "xfail", known
    if refusal is not None:
        return "refused", refusal
    return "pass", ""


def outcome(name: str, kind: str, verb: str, error: BaseException | None) -> tuple[str, str]:
    """The verdict of a cell that ran and raised ``error`` (or not)."""
    want, text = expectation(name, kind, verb)
    detail = "" if error is None else f"{type(error).__name__}: {str(error)[:300]}"
    if want == "n/a":
        return "n/a", text
    if want == "refused":
        if isinstance(error, FxvizError) and re.search(text, str(error)):
            return "refused", detail
        return "fail", f"expected the refusal /{text}/, got {detail or 'no error'}"
    if want == "xfail":
        return (
            ("xfail", text) if error is not None else ("fail", f"passes now: flip KNOWN ({text})")
        )
    return ("pass", "") if error is None else ("fail", detail)
