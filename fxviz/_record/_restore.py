"""What a Debugger puts back on ``restart()``: inputs and parameters the graph wrote to."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.fx

from fxviz._record._recorder import Recorder
from fxviz._record._writes import storage_key
from fxviz._torch_compat import version_of
from fxviz.errors import FxvizWarning

__all__ = ["RestoreCommands", "parameter_keys", "tensor_version"]


class RestoreCommands:
    """Mixed into :class:`fxviz.Debugger`: copies taken before in-place writes, put back."""

    graph: torch.fx.Graph
    graph_module: torch.fx.GraphModule
    _inputs: tuple[Any, ...]
    _input_versions: list[int | None]
    _options: dict[str, Any]
    _parameters: dict[int | None, str]
    _parameter_copies: dict[str, torch.Tensor]
    _parameter_versions: dict[str, int | None]
    _recorder: Recorder

    def _restore_inputs(self) -> None:
        """Write recorded copies back into inputs the graph wrote in place (directly or
        through a view: copies are taken per storage before any write)."""
        flat = list(self.graph.process_inputs(*self._inputs))
        placeholders = [e for e in self._recorder.entries if e.node.op == "placeholder"]
        for entry, original, version in zip(placeholders, flat, self._input_versions, strict=False):
            if not isinstance(original, torch.Tensor):
                continue
            if entry.snapshotted and entry.kept and isinstance(entry.value, torch.Tensor):
                with torch.no_grad():
                    original.copy_(entry.value)
            elif entry.snapshotted or tensor_version(original) != version:
                warnings.warn(
                    f"input {entry.node.name!r} was changed in place by the graph and no copy "
                    f"was kept (keep={self._options['keep']!r}); restart() runs on the "
                    "changed input",
                    FxvizWarning,
                    stacklevel=3,
                )

    def _save_parameters_before_write(self, tensors: list[torch.Tensor]) -> None:
        """Copy parameters a node is about to write in place (once), for restart()."""
        for t in tensors:
            name = self._parameters.get(storage_key(t)) if isinstance(t, torch.Tensor) else None
            if name is not None and name not in self._parameter_copies:
                self._parameter_copies[name] = t.detach().clone()

    def _warn_unrestorable_parameters(self) -> None:
        """Parameters changed in place where fxviz could not foresee it (inside a module)."""
        changed = [
            name
            for name, p in self.graph_module.named_parameters()
            if tensor_version(p) != self._parameter_versions.get(name, tensor_version(p))
            and name not in self._parameter_copies
        ]
        if changed:
            warnings.warn(
                f"parameters {changed} were changed in place where fxviz could not copy "
                "them first (inside a module's forward); restart() runs with the changed "
                "values",
                FxvizWarning,
                stacklevel=3,
            )


def parameter_keys(module: torch.nn.Module) -> dict[int | None, str]:
    """The memory of each parameter, to spot in-place writes into it."""
    keys = {storage_key(p): name for name, p in module.named_parameters()}
    keys.pop(None, None)
    return keys


def tensor_version(t: Any) -> int | None:
    """A tensor's version counter (bumped by every write, through any view); ``None`` for
    non-tensors and inference tensors, which have none."""
    return version_of(t) if isinstance(t, torch.Tensor) else None
