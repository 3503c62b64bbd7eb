"""Input specs: tensors described by shape and dtype, made real, fake or meta on demand.

``fxviz.spec(2, 128, dtype=torch.long)`` stands for an input without allocating it; the
command line parses text such as ``randint(0,50257,(2,128))`` into the same thing, with
Python's ``ast`` and a fixed list of names, never with ``eval``.

    >>> parse_spec("zeros(1,3,224,224,dtype=float16)")
    TensorSpec(shape=(1, 3, 224, 224), dtype=torch.float16, device=None, fill='zeros', args=())
    >>> parse_spec("randint(0,50257,(2,128))").materialize().shape
    torch.Size([2, 128])
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

import torch

from fxviz.errors import SpecError  # defined in errors.py, re-exported here

__all__ = ["SpecError", "TensorSpec", "parse_spec", "spec"]

_FILLS = ("randn", "rand", "zeros", "ones", "empty", "randint", "full")
_FORMS = (
    "randn(50,1000)",
    "rand(2,3)",
    "zeros(1,3,224,224,dtype=float16)",
    "ones((4,8))",
    "randint(0,50257,(2,128))",
    "full((2,2),0.5)",
)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """An input described by shape and dtype; ``fill`` says how a real one is made.

    ``args`` holds the fill's extra numbers: ``(low, high)`` for ``randint``, ``(value,)``
    for ``full``.

    Examples:
        >>> import torch, fxviz
        >>> s = fxviz.spec(2, 3, dtype=torch.float16)
        >>> s.shape, s.materialize().dtype
        ((2, 3), torch.float16)
    """

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    device: str | None = None
    fill: str = "randn"
    args: tuple[float, ...] = ()

    def materialize(self, device: str | torch.device | None = None) -> torch.Tensor:
        """A real tensor (or a fake/meta one inside such a mode or for ``device="meta"``)."""
        where = device if device is not None else (self.device or "cpu")
        kind = {"dtype": self.dtype, "device": where}
        if self.fill == "randint":
            low, high = self.args
            return torch.randint(int(low), int(high), self.shape, **kind)
        if self.fill == "full":
            return torch.full(self.shape, self.args[0], **kind)
        if self.fill in ("randn", "rand") and not (
            self.dtype.is_floating_point or self.dtype.is_complex
        ):
            return torch.zeros(self.shape, **kind)  # integer inputs: valid indices
        return getattr(torch, self.fill)(self.shape, **kind)

    def __str__(self) -> str:
        sizes = ",".join(map(str, self.shape))
        dtype = str(self.dtype).removeprefix("torch.")
        if self.fill == "randint":
            return f"randint({int(self.args[0])},{int(self.args[1])},({sizes},),dtype={dtype})"
        if self.fill == "full":
            return f"full(({sizes},),{self.args[0]},dtype={dtype})"
        return f"{self.fill}({sizes},dtype={dtype})"


def spec(*shape: int, dtype: torch.dtype = torch.float32, device: str | None = None) -> TensorSpec:
    """An input of this shape and dtype, allocated only in ``mode="real"``.

    Examples:
        >>> import torch, fxviz
        >>> fxviz.spec(2, 128, dtype=torch.long)
        TensorSpec(shape=(2, 128), dtype=torch.int64, device=None, fill='randn', args=())
    """
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise SpecError(f"spec() takes sizes as non-negative ints, not {shape!r}")
    if not isinstance(dtype, torch.dtype):
        raise SpecError(f"spec() takes dtype=torch.<dtype>, not {dtype!r}")
    return TensorSpec(tuple(shape), dtype, device)


def parse_spec(text: str) -> TensorSpec:
    """Parse ``randn(50,1000)``-style text into a :class:`TensorSpec` (never ``eval``)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise SpecError(_bad(text, f"it is not a call ({e.msg})")) from None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name)):
        raise SpecError(_bad(text, "it must be a call such as randn(2,3)"))
    fill = tree.func.id
    if fill not in _FILLS:
        raise SpecError(_bad(text, f"unknown function {fill!r} (must be one of {list(_FILLS)})"))
    numbers = [_literal(text, arg) for arg in tree.args]
    options = {kw.arg: _option(text, kw) for kw in tree.keywords}
    unknown = set(options) - {"dtype", "device", "size"}
    if unknown:
        raise SpecError(
            _bad(text, f"unknown keyword {sorted(map(str, unknown))[0]!r} (dtype=, device=)")
        )
    if "size" in options:
        numbers.append(options["size"])
    args: tuple[float, ...] = ()
    if fill == "randint":
        if len(numbers) == 2:
            numbers = [0, *numbers]
        if len(numbers) != 3 or not isinstance(numbers[2], tuple):
            raise SpecError(
                _bad(text, "randint takes (low, high, (sizes...)) or (high, (sizes...))")
            )
        args, shape = (float(numbers[0]), float(numbers[1])), numbers[2]
        default = torch.int64
    elif fill == "full":
        if len(numbers) != 2 or not isinstance(numbers[0], tuple):
            raise SpecError(_bad(text, "full takes ((sizes...), value)"))
        shape, args = numbers[0], (float(numbers[1]),)
        default = torch.float32
    else:
        shape = (
            numbers[0] if len(numbers) == 1 and isinstance(numbers[0], tuple) else tuple(numbers)
        )
        default = torch.float32
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise SpecError(_bad(text, "sizes must be non-negative integers"))
    dtype = options.get("dtype", default)
    return TensorSpec(tuple(shape), dtype, options.get("device"), fill, args)


def _literal(text: str, node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(text, node.operand)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_literal(text, item) for item in node.elts)
    raise SpecError(_bad(text, f"{ast.unparse(node)!r} is not a number or a tuple of numbers"))


def _option(text: str, keyword: ast.keyword) -> Any:
    if keyword.arg == "dtype":
        name = _name(keyword.value)
        dtype = getattr(torch, name or "", None)
        if not isinstance(dtype, torch.dtype):
            raise SpecError(_bad(text, f"unknown dtype {ast.unparse(keyword.value)!r}"))
        return dtype
    if keyword.arg == "device":
        name = _name(keyword.value)
        if name is None:
            raise SpecError(_bad(text, "device must be a name such as cpu, cuda or meta"))
        return name
    return _literal(text, keyword.value)


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "torch"
    ):
        return node.attr
    return None


def _bad(text: str, why: str) -> str:
    return f"cannot read the input spec {text!r}: {why}. Examples: {', '.join(_FORMS)}"
