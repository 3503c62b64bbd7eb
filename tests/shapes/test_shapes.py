"""fxviz.shapes: real, fake and meta propagation agree; reports read well; bad input is explained."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest
import torch
import torch.fx
from torch import nn
from torch.export import Dim
from torch.fx.passes.shape_prop import ShapeProp

import fxviz
from fxviz.examples import TwoLayerNet


class SmallGPT(nn.Module):
    """A two-block decoder with embeddings, attention, a causal mask and int inputs."""

    def __init__(self, vocab: int = 50, d: int = 16, heads: int = 2, seq: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                {
                    "ln": nn.LayerNorm(d),
                    "qkv": nn.Linear(d, 3 * d),
                    "proj": nn.Linear(d, d),
                    "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)),
                }
            )
            for _ in range(2)
        )
        self.register_buffer("future", torch.ones(seq, seq).triu(1).bool())
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for block in self.blocks:
            q, k, v = block["qkv"](block["ln"](x)).chunk(3, dim=-1)
            q = q.view(b, t, self.heads, -1).transpose(1, 2)
            k = k.view(b, t, self.heads, -1).transpose(1, 2)
            v = v.view(b, t, self.heads, -1).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (q.size(-1) ** -0.5)
            att = att.masked_fill(self.future, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, -1)
            x = x + block["proj"](y)
            x = x + block["mlp"](x)
        return self.head(x)


@pytest.fixture
def gpt_and_ids():
    return SmallGPT().eval(), torch.randint(0, 50, (2, 8))


def _shapes_by_node(report):
    return {name: (r.shape, r.dtype) for name, r in report.items()}


def test_three_modes_agree_with_each_other_and_with_shapeprop(gpt_and_ids):
    model, ids = gpt_and_ids
    real = fxviz.shapes(model, ids, mode="real")
    fake = fxviz.shapes(model, ids, mode="fake")
    meta = fxviz.shapes(model, ids, mode="meta")
    assert _shapes_by_node(real) == _shapes_by_node(fake) == _shapes_by_node(meta)
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(ids)
    for node in gm.graph.nodes:
        meta_info = node.meta.get("tensor_meta")
        if hasattr(meta_info, "shape"):
            assert real[node.name].shape == tuple(meta_info.shape), node.name
            assert real[node.name].dtype == meta_info.dtype, node.name
    assert real["head"].shape == (2, 8, 50)
    assert meta["head"].outputs[0].device == "meta"
    assert fake["head"].outputs[0].device == "cpu"


def test_meta_model_with_specs_in_meta_and_fake_modes():
    with torch.device("meta"):
        model = SmallGPT()
    ids = fxviz.spec(2, 8, dtype=torch.long)
    meta = fxviz.shapes(model, ids, mode="meta")
    fake = fxviz.shapes(model, ids, mode="fake")
    assert _shapes_by_node(meta) == _shapes_by_node(fake)
    assert fake["head"].shape == (2, 8, 50)
    with pytest.raises(fxviz.FxvizError, match="meta device"):
        fxviz.shapes(model, ids, mode="real")


def test_fake_mode_pretends_another_device_without_allocating():
    model = TwoLayerNet()
    report = fxviz.shapes(model, fxviz.spec(4, 1000), mode="fake", device="cuda")
    assert set(report.table()["device"]) == {"cuda:0"}
    assert next(model.parameters()).device.type == "cpu"  # the model itself is unchanged
    assert isinstance(next(model.parameters()), nn.Parameter)


def test_tensor_meta_is_written_like_shapeprop():
    gm = fxviz.trace(TwoLayerNet())
    fxviz.shapes(gm, torch.randn(3, 1000), mode="meta")
    meta = {n.name: n.meta["tensor_meta"] for n in gm.graph.nodes}
    assert tuple(meta["linear1"].shape) == (3, 100)
    assert meta["clamp"].dtype == torch.float32
    assert type(meta["linear2"]).__name__ == "TensorMetadata"


def test_table_columns_params_and_input_shapes():
    report = fxviz.shapes(TwoLayerNet(), torch.randn(64, 1000))
    table = report.table()
    assert list(table.columns) == [
        "op",
        "target",
        "module",
        "shape",
        "dtype",
        "device",
        "numel",
        "bytes",
        "params",
        "flops",
        "macs",
        "input_shapes",
        "symbolic_shape",
        "error",
    ]
    assert table.loc["linear1", "shape"] == "64×100"
    assert table.loc["linear1", "params"] == 1000 * 100 + 100
    assert table.loc["linear1", "input_shapes"] == "64×1000"
    assert table.loc["clamp", "bytes"] == 64 * 100 * 4


def test_summary_peak_live_activation_bytes():
    def f(x):
        a = x * 2  # 400 B, lives on through its view b until c is made
        b = a.view(-1)  # a view: shares a's memory
        c = b + 1  # 400 B
        d = torch.cat([c, c])  # 800 B; c's last use
        return d.sum()

    report = fxviz.shapes(f, torch.randn(10, 10))
    s = report.totals()
    assert s["peak_live_bytes"] == 400 + 800  # c and d, at 'cat' (a died after 'add')
    assert s["peak_node"] == "cat"
    assert fxviz.shapes(f, torch.randn(10, 10), mode="meta").totals() == s | {"complete": True}
    assert s["activation_bytes"] == 400 + 400 + 800 + 4  # the view is not counted again
    assert s["parameters"] == 0


def test_summary_counts_parameters_once_even_when_shared():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, ids):
            return self.out(self.emb(ids))

    s = fxviz.shapes(Tied(), torch.tensor([[1, 2]])).totals()
    assert s["parameters"] == 40
    assert s["parameter_bytes"] == 160


def test_dynamic_shapes_from_export_show_symbols_and_examples():
    model = TwoLayerNet()
    program = torch.export.export(
        model, (torch.randn(8, 1000),), dynamic_shapes={"x": {0: Dim("batch")}}
    )
    report = fxviz.shapes(program, torch.randn(5, 1000), mode="fake")
    table = report.table()
    symbolic = table.loc["linear", "symbolic_shape"]
    assert symbolic.endswith("×100")
    assert symbolic.startswith("s")
    assert table.loc["linear", "shape"] == "5×100"
    assert table.loc["linear1_weight", "symbolic_shape"] == ""


def test_shapes_diff_batch_1_vs_8(gpt_and_ids):
    model, _ = gpt_and_ids
    one = fxviz.shapes(model, fxviz.spec(1, 8, dtype=torch.long), mode="meta")
    eight = fxviz.shapes(model, fxviz.spec(8, 8, dtype=torch.long), mode="meta")
    diff = fxviz.shapes_diff(one, eight)
    assert diff.loc["head", "shape_a"] == "1×8×50"
    assert diff.loc["head", "shape_b"] == "8×8×50"
    assert "future" not in diff.index  # the buffer does not depend on the batch
    assert set(diff["change"]) == {"shape"}
    assert fxviz.shapes_diff(one, one).empty


def test_shapes_diff_reports_dtype_changes_and_added_nodes():
    a = fxviz.shapes(lambda x: x.relu(), torch.randn(3))
    b = fxviz.shapes(lambda x: x.relu().half(), torch.randn(3))
    diff = fxviz.shapes_diff(a, b)
    assert diff.loc["half", "change"] == "added"
    assert diff.loc["output", "change"] == "dtype"


def test_csv_markdown_and_html(tmp_path):
    report = fxviz.shapes(TwoLayerNet(), torch.randn(2, 1000))
    csv = report.to_csv()
    assert pd.read_csv(io.StringIO(csv), index_col="name").loc["linear2", "shape"] == "2×10"
    markdown = report.to_markdown()
    assert markdown.splitlines()[0].startswith("| name")
    assert "| linear1 " in markdown
    path = tmp_path / "shapes.md"
    report.to_markdown(str(path))
    assert path.read_text().startswith("| name")
    html = report._repr_html_()
    assert "<table" in html
    assert "peak live" in html


def test_html_escapes_hostile_names_and_marks_dtype_changes():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    node = graph.call_method("half", (x,))
    node.name = "<img src=x onerror=alert(1)>"
    graph.output(node)
    gm = torch.fx.GraphModule(nn.Module(), graph)
    html = fxviz.shapes(gm, torch.randn(2)).table().pipe(lambda t: t)  # table works
    assert "<img" in html.index[1]
    page = fxviz.shapes(gm, torch.randn(2))._repr_html_()
    assert "<img src" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "background-color" in page  # the float32 -> float16 change is highlighted


def test_wrong_rank_names_the_node_and_keeps_partial_results(gpt_and_ids):
    model, _ = gpt_and_ids
    with pytest.raises(fxviz.ShapeError) as info:
        fxviz.shapes(model, torch.randint(0, 50, (8,)), mode="fake")
    err = info.value
    assert err.node == "getitem_1"  # `b, t = ids.shape` needs two dims
    assert "IndexError" in str(err)
    partial = err.report
    assert not partial.complete
    assert list(partial)[:1] == ["ids"]
    assert partial.table().loc[err.node, "error"].startswith("IndexError")


def test_wrong_dtype_is_explained():
    with pytest.raises(fxviz.ShapeError, match=r"node 'tok'.*\n  inputs: ids: float32\[2, 8\]"):
        fxviz.shapes(SmallGPT(), torch.randn(2, 8), mode="meta")


def test_op_without_a_meta_kernel_suggests_real_mode():
    @torch.library.custom_op("fxviz_test::cpu_only", mutates_args=())
    def cpu_only(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    def f(x):
        return cpu_only(x) + 1

    assert fxviz.shapes(f, torch.randn(3))["add"].shape == (3,)
    with pytest.raises(fxviz.ShapeError, match="use mode='real'") as info:
        fxviz.shapes(f, torch.randn(3), mode="meta")
    assert info.value.node == "cpu_only_default"


def test_an_op_whose_output_shape_comes_from_values_says_so_in_every_mode():
    # Qwen2-VL's vision tower repeats by tensor counts: the meta kernel said "this op has
    # no meta kernel", though it has one that needs output_size, i.e. the counts' values
    def f(x, counts):
        return torch.repeat_interleave(x, counts, dim=0) * 2

    x, counts = torch.randn(3, 2), torch.tensor([1, 2, 3])
    assert fxviz.shapes(f, x, counts)["mul"].shape == (6, 2)
    for mode in ("fake", "meta"):
        with pytest.raises(fxviz.ShapeError) as info:
            fxviz.shapes(f, x, counts, mode=mode)
        assert info.value.node == "repeat_interleave"
        assert f"In mode={mode!r} this op needs the tensor's values" in str(info.value)
        assert "use mode='real'" in str(info.value)


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown mode: 'fast'"):
        fxviz.shapes(TwoLayerNet(), torch.randn(1, 1000), mode="fast")
    with pytest.raises(ValueError, match="needs mode='fake'"):
        fxviz.shapes(TwoLayerNet(), torch.randn(1, 1000), device="cuda")
    with pytest.raises(fxviz.InputError):
        fxviz.shapes(TwoLayerNet(), torch.randn(1, 1000), torch.randn(1))


def test_notebook_table_indents_every_node_of_a_module_alike():
    """Issue 13: a module's own functions and the submodules it calls sat at different
    indents, so the rows of a block alternated in and out."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU()

        def forward(self, x):
            return x + self.act(self.fc(x)).relu()

    model = nn.Sequential(nn.Sequential(Block(), nn.Linear(4, 4)), nn.Linear(4, 2))
    report = fxviz.shapes(model, torch.randn(2, 4))
    page = report._repr_html_()
    padding = {}  # row heading id -> its padding, from the page's own CSS rules
    for selectors, em in re.findall(r"([^{}]+)\{\s*padding-left: ([0-9.]+)em", page):
        for selector in selectors.split(","):
            padding[selector.strip().lstrip("#")] = float(em)
    indent = {
        name: padding[row_id]
        for row_id, name in re.findall(
            r'<th id="([^"]+)" class="row_heading[^>]*>([^<]+)</th>', page
        )
    }
    assert set(indent) == set(report.table().index)
    block = ["_0_0_fc", "_0_0_act", "relu", "add"]  # all run inside the block 0.0
    assert report.table().loc[block, "module"].tolist() == ["0.0.fc", "0.0.act", "0.0", "0.0"]
    assert len({indent[n] for n in block}) == 1
    assert indent["_0_1"] < indent["relu"]  # 0.1 runs one level up, in 0
    assert indent["_1"] < indent["_0_1"]  # 1 runs at the top level
    assert indent["_1"] == indent["input_1"] == indent["output"]
