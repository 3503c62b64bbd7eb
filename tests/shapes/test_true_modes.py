"""Meta and fake modes never compute on real data: exported Hugging Face graphs, tied
weights, device constants, and a check that names the node that would have."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch import nn

import fxviz
from tests import hf_models


def _outputs(report):
    return [(r.name, s) for r in report.recording.values() for s in r.outputs]


@pytest.fixture(scope="module", params=hf_models.NAMES)
def hf_program(request):
    return hf_models.exported(request.param)


@pytest.mark.parametrize("mode", ["meta", "fake"])
def test_hf_export_graphs_match_real_shapes_on_meta_and_fake(hf_program, mode):
    from torch._subclasses.fake_tensor import FakeTensor

    program, inputs = hf_program
    real = fxviz.shapes(program, *inputs, progress=False)
    seen = []
    original = fxviz._shapes._propagate.check_placement

    def spy(node, value, m):
        seen.extend(t for t in fxviz._record._summary.iter_tensors(value))
        return original(node, value, m)

    fxviz._shapes._propagate.check_placement = spy
    try:
        other = fxviz.shapes(program, *inputs, mode=mode, progress=False)
    finally:
        fxviz._shapes._propagate.check_placement = original
    assert other.complete
    assert [(n, s.shape, s.dtype) for n, s in _outputs(other)] == [
        (n, s.shape, s.dtype) for n, s in _outputs(real)
    ]
    assert seen, "every node's output went through the placement check"
    for _, t in seen:
        assert t.is_meta if mode == "meta" else isinstance(t, FakeTensor)
    if mode == "meta":
        assert {s.device for _, s in _outputs(other)} == {"meta"}


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(30, 16)
        self.body = nn.Linear(16, 16)
        self.lm_head = nn.Linear(16, 30, bias=False)
        self.lm_head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(torch.relu(self.body(self.embed(ids))))


@pytest.mark.parametrize("method", ["symbolic", "export"])
@pytest.mark.parametrize("mode", ["meta", "fake"])
def test_tied_weights_are_swapped_under_every_name(method, mode):
    model = TiedLM().eval()
    ids = torch.randint(0, 30, (2, 5))
    gm = fxviz.trace(model, ids, method=method)
    real = fxviz.shapes(gm, ids, progress=False)
    other = fxviz.shapes(gm, ids, mode=mode, progress=False)
    assert [s.shape for _, s in _outputs(other)] == [s.shape for _, s in _outputs(real)]
    if mode == "meta":
        assert {s.device for _, s in _outputs(other)} == {"meta"}
    # the model itself is untouched: still tied, still real
    assert model.lm_head.weight is model.embed.weight
    assert not model.embed.weight.is_meta


def test_export_device_constants_are_retargeted_to_meta():
    class Positions(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(x.shape[1], device=x.device)
            return (x + pos).to(x.device, torch.float32)

    x = torch.ones(2, 6)
    gm = fxviz.trace(Positions(), x, method="export")
    assert any(n.kwargs.get("device") == torch.device("cpu") for n in gm.graph.nodes)
    rep = fxviz.shapes(gm, x, mode="meta", progress=False)
    assert {s.device for _, s in _outputs(rep)} == {"meta"}
    # the graph itself is left as it was
    assert any(n.kwargs.get("device") == torch.device("cpu") for n in gm.graph.nodes)


_REAL_TABLE = torch.arange(4.0)


@torch.fx.wrap
def _cpu_side_table(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(4, device="cpu") + _REAL_TABLE


@torch.fx.wrap
def _real_constant(x: torch.Tensor) -> torch.Tensor:
    return _REAL_TABLE


class LeakyMeta(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + _cpu_side_table(x)


class LeakyFake(LeakyMeta):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + _real_constant(x)


@pytest.mark.parametrize(
    ("mode", "model", "fn"),
    [("meta", LeakyMeta, _cpu_side_table), ("fake", LeakyFake, _real_constant)],
)
def test_a_real_computation_in_meta_or_fake_mode_raises_naming_the_node(mode, model, fn):
    gm = torch.fx.symbolic_trace(model())
    with pytest.raises(fxviz.ShapeError) as info:
        fxviz.shapes(gm, torch.ones(2, 4), mode=mode, progress=False)
    err = info.value
    assert err.node == f"{fn.__name__}"
    assert isinstance(err.__cause__, fxviz.PlacementError)
    assert "computed on real data" in str(err)
    assert repr(err.node) in str(err)
    assert err.report.recording["lin"].outputs  # the nodes before it are on .report


def test_cpu_calls_in_a_meta_run_are_retargeted():
    class ItemShape(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.new_zeros(3).cpu() + x.sum(0)[:3].to("cpu") + torch.ones(3, device="cpu")

    x = torch.ones(2, 3)
    gm = torch.fx.symbolic_trace(ItemShape())
    # a .cpu() in a meta run is retargeted too; the run goes through
    rep = fxviz.shapes(gm, x, mode="meta", progress=False)
    assert {s.device for _, s in _outputs(rep)} == {"meta"}


@torch.fx.wrap
def _needs_cpu(x: torch.Tensor) -> torch.Tensor:
    return x + torch.ones(x.shape[-1], device="cpu")


def test_meta_failure_that_fake_survives_suggests_fake():
    class Model(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _needs_cpu(x) * 2

    gm = torch.fx.symbolic_trace(Model())
    with pytest.raises(fxviz.ShapeError) as info:
        fxviz.shapes(gm, torch.ones(2, 3), mode="meta", progress=False)
    assert "use mode='fake'" in str(info.value)
    assert "use mode='real'" not in str(info.value)
    rep = fxviz.shapes(gm, torch.ones(2, 3), mode="fake", progress=False)
    assert rep["mul"].shape == (2, 3)


@pytest.mark.parametrize("name", hf_models.NAMES)
def test_a_model_built_on_the_meta_device_gives_its_shapes_in_meta_and_fake_mode(name):
    real_model, inputs = hf_models.build(name)
    real = real_model(*inputs)
    with torch.device("meta"):
        model, _ = hf_models.build(name)
    assert all(p.is_meta for p in model.parameters())
    meta = fxviz.shapes(model, *inputs, mode="meta", progress=False)
    fake = fxviz.shapes(model, *inputs, mode="fake", progress=False)
    shapes = [(n, s.shape, s.dtype) for n, s in _outputs(meta)]
    assert [(n, s.shape, s.dtype) for n, s in _outputs(fake)] == shapes
    first = real if isinstance(real, torch.Tensor) else real[0]
    assert fake["output"].outputs[0].shape == tuple(first.shape)  # logits or hidden states
    # fake mode pretends the model lives on the CPU: the capture's meta constants follow
    assert {s.device for _, s in _outputs(meta)} == {"meta"}
    assert {s.device for _, s in _outputs(fake)} == {"cpu"}
    assert all(p.is_meta for p in model.parameters())


class DeviceConstants(nn.Module):
    """Device constants every capture bakes in: ``arange(device=x.device)``, ``.to``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1], device=x.device)
        return self.lin((x + pos).to(x.device, torch.float32))


@pytest.mark.parametrize("method", ["export", "dynamo", "real", "symbolic"])
def test_fake_mode_pretends_another_device_on_every_capture(method):
    x = torch.ones(2, 6)
    gm = fxviz.trace(DeviceConstants(), x, method=method)
    before = [(n.args, n.kwargs) for n in gm.graph.nodes]
    rep = fxviz.shapes(gm, x, mode="fake", device="cuda", progress=False)
    assert {s.device for _, s in _outputs(rep)} == {"cuda:0"}
    assert rep["output"].shape == (2, 6)
    assert [(n.args, n.kwargs) for n in gm.graph.nodes] == before  # the graph as it was


class AutocastOnItsDevice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            y = self.lin(x)
            with torch.autocast(x.device.type, enabled=False):  # rotary embeddings do this
                kept = self.lin(y.float())
        return y.float() + 1, kept


def test_an_exported_autocast_region_runs_on_the_pretended_device():
    # exported on the CPU: the region says "cpu", and its dtype is checked after it
    gm = fxviz.trace(AutocastOnItsDevice(), torch.ones(3, 4))
    assert gm.meta["fxviz_method"] == "export"
    rep = fxviz.shapes(gm, torch.ones(3, 4), mode="fake", device="cuda", progress=False)
    assert rep["linear"].outputs[0].dtype == torch.bfloat16  # autocast("cuda") on a GPU
    assert rep["linear"].outputs[0].device == "cuda:0"
    assert rep["linear_1"].outputs[0].dtype == torch.float32  # the inner region, on cuda too
    assert [s.dtype for s in rep["output"].outputs] == [torch.float32, torch.float32]
    assert torch.is_autocast_enabled("cuda") is False  # the pretended region is closed


def test_fake_mode_pretends_cuda_for_an_exported_language_model():
    model, inputs = hf_models.build("llama")
    rep = fxviz.shapes(model, *inputs, mode="fake", device="cuda", progress=False)
    real = fxviz.shapes(model, *inputs, progress=False)
    assert {s.device for _, s in _outputs(rep)} == {"cuda:0"}
    assert [s.shape for _, s in _outputs(rep)] == [s.shape for _, s in _outputs(real)]


def test_a_cpu_constant_the_model_writes_itself_stays_on_the_cpu_in_fake_mode():
    class CpuTable(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + torch.ones(x.shape[-1], device="cpu")  # the model's own choice

    gm = torch.fx.symbolic_trace(CpuTable())
    # as on a real GPU: the model's own "cpu" is not moved, so the add mixes devices
    with pytest.raises(fxviz.ShapeError, match="cpu") as info:
        fxviz.shapes(gm, torch.ones(2, 3), mode="fake", device="cuda", progress=False)
    assert info.value.node == "add"


class DictBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.rnn = nn.LSTM(4, 5, batch_first=True)

    def forward(self, batch: dict[str, torch.Tensor], state: tuple[torch.Tensor, torch.Tensor]):
        out, _ = self.rnn(batch["x"], state)
        return self.lin(batch["x"]) + out[..., :3]


@pytest.mark.parametrize("mode", ["meta", "fake"])
@pytest.mark.parametrize("as_spec", [False, True], ids=["tensors", "specs"])
def test_tensors_and_specs_inside_containers_are_made_fake_or_meta(mode, as_spec):
    def make(*shape: int):
        return fxviz.spec(*shape) if as_spec else torch.randn(*shape)

    batch, state = {"x": make(2, 6, 4)}, (make(1, 2, 5), make(1, 2, 5))
    rep = fxviz.shapes(DictBatch(), batch, state, mode=mode, progress=False)
    assert rep["output"].shape == (2, 6, 3)
    assert {s.device for _, s in _outputs(rep)} == {"meta" if mode == "meta" else "cpu"}


@pytest.mark.parametrize("mode", ["real", "meta", "fake"])
def test_every_mode_takes_the_path_a_plain_call_takes(mode):
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: torch.Tensor):
            top = x.max(-1).values  # torch.return_types.max: read by name
            return self.mha(x, x, x, need_weights=False), top

    model, x = Attention().eval(), torch.randn(2, 5, 8)
    (out, weights), top = model(x)
    assert weights is None  # grad mode on: not the inference fast path
    rep = fxviz.shapes(model, x, mode=mode, progress=False)
    assert [s.shape for s in rep["output"].outputs] == [tuple(out.shape), tuple(top.shape)]


class SlicesItsBuffer(nn.Module):
    """Symbolic tracing cannot hold ``x.shape[1]`` as a slice bound; export can, if its
    example input lives where the buffer does."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("pos", torch.arange(8.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.pos[: x.shape[1], None]


@pytest.mark.parametrize("mode", ["real", "meta", "fake"])
def test_specs_capture_a_cpu_model_that_needs_export(mode):
    model = SlicesItsBuffer()
    expected = model(torch.randn(2, 3, 4)).shape
    rng = torch.random.get_rng_state()
    for _ in range(2):  # the second call goes straight to the inputs that worked
        rep = fxviz.shapes(model, fxviz.spec(2, 3, 4), mode=mode, progress=False)
        assert rep["output"].shape == tuple(expected)
    if mode != "real":  # a real run draws the spec's values; the capture draws none
        assert torch.equal(torch.random.get_rng_state(), rng)


class MakesTensors(nn.Module):
    def __init__(self, on_input_device: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.on_input_device = on_input_device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor(2.0)  # a CPU scalar: fine beside a GPU tensor
        if self.on_input_device:
            return self.lin(x) * scale + torch.arange(4, device=x.device)
        return self.lin(x) * scale + torch.arange(4)  # on the CPU, wherever the model is


def test_pretending_cuda_catches_a_tensor_forward_makes_on_the_cpu():
    ok = fxviz.shapes(MakesTensors(True), fxviz.spec(2, 4), mode="fake", device="cuda")
    assert ok["output"].outputs[0].device == "cuda:0"
    # as on a real GPU: the arange stays on the CPU and the add mixes devices
    with pytest.raises(fxviz.ShapeError, match="cuda:0 and cpu") as info:
        fxviz.shapes(MakesTensors(False), fxviz.spec(2, 4), mode="fake", device="cuda")
    assert info.value.node == "add"
