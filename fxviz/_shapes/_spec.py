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
import math
import os
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


_MAX_TEXT = 1000  # a spec is a short call; longer text is refused before parsing
_MAX_INT = 2**63 - 1  # torch sizes and element counts are int64


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

    def materialize(
        self, device: str | torch.device | None = None, *, allocates: bool = True
    ) -> torch.Tensor:
        """A real tensor (or a fake/meta one inside such a mode or for ``device="meta"``).

        ``allocates=False``: made inside a fake mode, where nothing is allocated, so a
        spec larger than the machine's memory is fine (the point of fake mode).

        Raises:
            SpecError: the tensor cannot be made here (a device this build lacks, more
                memory than the machine has, a value its dtype cannot hold).
        """
        where = torch.device(parse_device(device if device is not None else self.device or "cpu"))
        if where.type == "cpu" and allocates:
            _check_fits_in_memory(self)
        try:
            return self._make(where)
        except (RuntimeError, AssertionError, MemoryError, OverflowError) as e:
            # torch signals a missing CUDA with AssertionError, a failed malloc with
            # RuntimeError: both mean this spec cannot be made here, not a bug.
            raise SpecError(_cannot_make(self, where, e)) from e

    def _make(self, where: torch.device) -> torch.Tensor:
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

    @property
    def nbytes(self) -> int:
        """Bytes a real tensor of this spec takes."""
        return math.prod(self.shape) * self.dtype.itemsize

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
    why = _size_problem(shape)
    if why:
        raise SpecError(f"spec{tuple(shape)!r}: {why}")
    return TensorSpec(tuple(shape), dtype, None if device is None else parse_device(device))


def parse_device(name: str | torch.device) -> str:
    """``name`` checked to be a device torch knows (``"cpu"``, ``"cuda:1"``, ``"meta"``).

    >>> parse_device("cuda:1")
    'cuda:1'
    >>> parse_device("evil")
    Traceback (most recent call last):
    ...
    fxviz.errors.SpecError: unknown device 'evil' (use cpu, cuda, cuda:1, mps or meta)
    """
    try:
        return str(torch.device(name))
    except (RuntimeError, TypeError, ValueError):
        raise SpecError(
            f"unknown device {str(name)!r} (use cpu, cuda, cuda:1, mps or meta)"
        ) from None


def parse_spec(text: str) -> TensorSpec:
    """Parse ``randn(50,1000)``-style text into a :class:`TensorSpec` (never ``eval``)."""
    if len(text) > _MAX_TEXT:
        raise SpecError(_bad(text[:40] + "...", f"it is longer than {_MAX_TEXT} characters"))
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise SpecError(_bad(text, f"it is not a call ({e.msg})")) from None
    except (MemoryError, RecursionError):  # the parser gives up on deep nesting
        raise SpecError(_bad(text[:40], "it is nested too deeply")) from None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name)):
        raise SpecError(_bad(text, "it must be a call such as randn(2,3)"))
    fill = tree.func.id
    if fill not in _FILLS:
        raise SpecError(_bad(text, f"unknown function {fill!r} (must be one of {list(_FILLS)})"))
    unknown = sorted({str(kw.arg) for kw in tree.keywords} - {"dtype", "device", "size"})
    if unknown:
        raise SpecError(_bad(text, f"unknown keyword {unknown[0]!r} (dtype=, device=)"))
    numbers = [_literal(text, arg) for arg in tree.args]
    options = {kw.arg: _option(text, kw) for kw in tree.keywords}
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
        low, high, shape = numbers
        if not all(isinstance(n, int) for n in (low, high)) or not low < high:
            raise SpecError(
                _bad(text, f"randint needs whole numbers low < high, not {low}, {high}")
            )
        args = (low, high)
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
    why = _size_problem(shape)
    if why:
        raise SpecError(_bad(text, why))
    dtype = options.get("dtype", default)
    return TensorSpec(tuple(shape), dtype, options.get("device"), fill, args)


def _literal(text: str, node: ast.expr) -> Any:
    sign = 1
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # no recursion
        sign, node = -sign, node.operand
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)  # True is an int to Python, not a size
    ):
        if isinstance(node.value, float) and not math.isfinite(node.value):
            number = ast.get_source_segment(text.strip(), node) or "a number"
            raise SpecError(_bad(text, f"{number} is too large for a float (write inf)"))
        return sign * node.value
    if isinstance(node, ast.Name) and node.id in ("inf", "nan"):
        return sign * float(node.id)
    if isinstance(node, (ast.Tuple, ast.List)) and sign == 1:
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
        try:
            return parse_device(name)
        except SpecError as e:
            raise SpecError(_bad(text, str(e))) from None
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


def _size_problem(shape: tuple[Any, ...]) -> str:
    """Why torch could not hold a tensor of this shape ("" when it can)."""
    if any(d > _MAX_INT for d in shape) or math.prod(shape) > _MAX_INT:
        return "the sizes overflow int64 (torch counts elements in 64 bits)"
    return ""


def _check_fits_in_memory(spec: TensorSpec) -> None:
    """Refuse before allocating a tensor bigger than the machine's memory (Linux only):
    a huge ``malloc`` may succeed and the process be killed while filling it."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not Linux: let the allocator decide
        return
    if spec.nbytes > total:
        raise SpecError(
            f"the input {spec} needs {_size(spec.nbytes)} but this machine has "
            f"{_size(total)} of memory. Use --mode fake or --mode meta to propagate "
            "shapes without allocating (fxviz.shapes(..., mode='fake') in Python)"
        )


def _cannot_make(spec: TensorSpec, where: torch.device, error: BaseException) -> str:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    message = f"cannot make the input {spec} on {where}: {reason}"
    backend = getattr(torch, where.type, None)
    is_available = getattr(backend, "is_available", None)
    if callable(is_available) and not is_available():
        message += (
            f". This PyTorch build or machine has no {where.type}: use --mode fake "
            f"--device {where.type} to check shapes on a pretend {where.type} device "
            f"(fxviz.shapes(..., mode='fake', device={where.type!r}) in Python)"
        )
    return message


def _size(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if nbytes < 1000 or unit == "TB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{int(nbytes)} B"
        nbytes /= 1000
    return ""  # pragma: no cover
