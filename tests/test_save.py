"""Saved recordings: Recording.save / fxviz.load round trips, across processes, and refuse
crafted or corrupted files without running anything."""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import torch

import fxviz
from fxviz.examples import TwoLayerNet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _recording():
    torch.manual_seed(0)
    return fxviz.record(TwoLayerNet(), torch.randn(8, 1000))


def _same_values(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.equal(b)) or (
            a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)
        )
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_values, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_values(a[k], b[k]) for k in a)
    return a == b


def test_round_trip_keeps_table_values_and_drawing(tmp_path):
    rec = _recording()
    path = rec.save(tmp_path / "run.fxrec")
    loaded = fxviz.load(path)
    pd.testing.assert_frame_equal(loaded.table(), rec.table())
    for r in rec.values():
        assert loaded[r.name].kept == r.kept
        assert _same_values(loaded[r.name].value, r.value), r.name
    assert torch.equal(loaded.output, rec.output)
    assert loaded.complete
    assert loaded.error is None
    assert fxviz.to_dot(loaded).source == fxviz.to_dot(rec).source
    assert "loaded from run.fxrec" in repr(loaded)
    assert loaded.saved["torch"] == torch.__version__


def test_other_dtypes_structures_nonfinite_and_in_place_writes(tmp_path):
    def f(x, ids):
        y = x.to(torch.bfloat16) * 2
        z = torch.log(x)  # NaN for negative inputs
        parts = torch.split(x, 2)
        x.add_(1)  # an in-place write: the records keep x as it was
        return {"y": y, "z": z, "parts": parts, "ids": ids + 1, "n": x.shape[0]}

    x = torch.tensor([1.0, -1.0, 2.0, 3.0])
    rec = fxviz.record(f, x.clone(), torch.arange(3))
    loaded = fxviz.load(rec.save(tmp_path / "f.fxrec"))
    pd.testing.assert_frame_equal(loaded.table(), rec.table())
    assert loaded.first_nonfinite().name == rec.first_nonfinite().name == "log"
    for r in rec.values():
        assert _same_values(loaded[r.name].value, r.value), r.name
        assert loaded[r.name].mutates == r.mutates
        assert loaded[r.name].aliases == r.aliases
    assert torch.equal(loaded["x"].value, x)  # as it was before add_
    assert loaded["to"].value.dtype == torch.bfloat16


def test_a_failed_run_keeps_its_error(tmp_path):
    gm = torch.fx.symbolic_trace(lambda x: x.view(3, 3))
    with pytest.raises(fxviz.NodeError) as raised:
        fxviz.record(gm, torch.randn(4))
    rec = raised.value.recording
    loaded = fxviz.load(rec.save(tmp_path / "failed.fxrec"))
    assert not loaded.complete
    assert type(loaded.error).__name__ == type(rec.error).__name__
    assert str(loaded.error) == str(rec.error)
    assert type(loaded["view"].error).__name__ == "RuntimeError"
    assert "shape '[3, 3]' is invalid" in str(loaded["view"].error)
    assert "✖ RuntimeError" in fxviz.to_dot(loaded).source
    assert "error at 'view'" in loaded.summary()


def test_values_false_saves_records_only(tmp_path):
    rec = _recording()
    path = rec.save(tmp_path / "small.fxrec", values=False)
    loaded = fxviz.load(path)
    assert not any(r.kept for r in loaded.values())
    assert loaded["linear1"].outputs == rec["linear1"].outputs
    assert path.stat().st_size < 64_000  # the values alone are ~100 KB


def test_saving_a_loaded_recording_again(tmp_path):
    rec = _recording()
    again = fxviz.load(fxviz.load(rec.save(tmp_path / "a.fxrec")).save(tmp_path / "b.fxrec"))
    pd.testing.assert_frame_equal(again.table(), rec.table())
    assert torch.equal(again["linear2"].value, rec["linear2"].value)


def test_report_and_show_of_a_loaded_recording(tmp_path):
    loaded = fxviz.load(_recording().save(tmp_path / "run.fxrec"))
    page = fxviz.report(loaded)
    assert '"replay":{' in page
    assert "model: TwoLayerNet (symbolic_trace) · 5 nodes" in page
    view = fxviz.show(loaded)
    view.selected = "linear1"
    fields = dict(view.inspector["fields"])
    assert fields["op"] == "call_module"
    assert fields["output"] == "float32 8×100 on cpu"
    assert view.inspector["preview"].startswith("[")


_MAKE = """
import sys, json, torch, fxviz
class Hidden(torch.nn.Module):  # defined only in this process
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 4)
    def forward(self, x):
        return torch.softmax(self.proj(x).relu() * 3, dim=-1)
torch.manual_seed(1)
rec = fxviz.record(Hidden(), torch.randn(5, 6))
rec.save(sys.argv[1])
print(json.dumps({"table": rec.table().to_json(), "values": {
    r.name: r.value.tolist() for r in rec.values() if isinstance(r.value, torch.Tensor)}}))
"""


def test_saved_in_one_process_loads_in_another(tmp_path):
    path = tmp_path / "hidden.fxrec"
    done = subprocess.run(
        [sys.executable, "-c", _MAKE, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)
    loaded = fxviz.load(path)  # the model class does not exist in this process
    assert loaded.table().to_json() == expected["table"]
    assert set(expected["values"]) == {"x", "proj", "relu", "mul", "softmax", "output"}
    for name, values in expected["values"].items():
        assert loaded[name].value.tolist() == values
    assert "Linear(6→4)" in fxviz.to_dot(loaded).source


# -- files that must be refused, with nothing run ---------------------------------------------


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_payload_is_never_run(tmp_path):
    marker = tmp_path / "pwned"
    for name, write in {
        "raw.fxrec": lambda p: p.write_bytes(pickle.dumps(_Payload(marker))),
        "torch.fxrec": lambda p: torch.save({"x": _Payload(marker)}, p),
    }.items():
        path = tmp_path / name
        write(path)
        with pytest.raises(fxviz.RecordingFileError, match="never unpickles"):
            fxviz.load(path)
    assert not marker.exists()
    pickle.loads(pickle.dumps(_Payload(marker)))  # the payload does work when unpickled
    assert marker.exists()


def _split(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _join(path, header, body):
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


@pytest.fixture
def saved(tmp_path):
    return _recording().save(tmp_path / "good.fxrec")


def test_truncated_and_lying_lengths_are_refused(saved, tmp_path):
    data = saved.read_bytes()
    cut = tmp_path / "cut.fxrec"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(fxviz.RecordingFileError, match="corrupted"):
        fxviz.load(cut)
    (n,) = struct.unpack("<Q", data[:8])
    for wrong in (n + 10**6, n - 7, 2**63):
        lying = tmp_path / "lying.fxrec"
        lying.write_bytes(struct.pack("<Q", wrong) + data[8:])
        with pytest.raises(fxviz.RecordingFileError):
            fxviz.load(lying)
    for junk in (b"", b"abc", b"x" * 100):
        path = tmp_path / "junk.fxrec"
        path.write_bytes(junk)
        with pytest.raises(fxviz.RecordingFileError, match="not a saved fxviz recording"):
            fxviz.load(path)
    with pytest.raises(fxviz.RecordingFileError, match="no such file"):
        fxviz.load(tmp_path / "missing.fxrec")


def test_a_huge_declared_shape_is_refused(saved, tmp_path):
    header, body = _split(saved)
    bad = tmp_path / "huge.fxrec"
    block = dict(header["s0"])
    header["s0"]["shape"] = [10**9, 10**9, 10**9]  # the block header lies
    _join(bad, header, body)
    with pytest.raises(fxviz.RecordingFileError, match="corrupted"):
        fxviz.load(bad)
    header["s0"] = block
    records = json.loads(header["__metadata__"]["fxviz"])
    leaf = records["records"][1]["value"]
    for lie, match in (
        ({"shape": [10**12, 10**12], "stride": [0, 0]}, "refused"),  # no memory behind it
        ({"shape": [10**6, 10**3], "stride": [10**3, 1]}, "reaches past"),  # out of bounds
        ({"stride": [-1, 1]}, "malformed"),
        ({"dtype": "object"}, "malformed"),
    ):
        records["records"][1]["value"] = {**leaf, **lie}
        header["__metadata__"]["fxviz"] = json.dumps(records)
        _join(bad, header, body)
        loaded = fxviz.load(bad)  # values are read on first use, and checked then
        with pytest.raises(fxviz.RecordingFileError, match=match):
            loaded[1].value


def test_views_share_one_block_like_torch_save(tmp_path):
    def f(x):
        y = x * 2
        return y.t(), y[1:], y.view(-1)

    rec = fxviz.record(f, torch.randn(300, 400))
    path = rec.save(tmp_path / "views.fxrec")
    data = 2 * 300 * 400 * 4  # x and y; the three views add nothing
    assert data <= path.stat().st_size < data + 64_000
    loaded = fxviz.load(path)
    for r in rec.values():
        assert _same_values(loaded[r.name].value, r.value), r.name
    assert loaded["t"].value.stride() == rec["t"].value.stride()


def test_corrupted_records_name_what_is_wrong(saved, tmp_path):
    header, body = _split(saved)
    records = json.loads(header["__metadata__"]["fxviz"])
    records["records"][2]["index"] = "two"
    header["__metadata__"]["fxviz"] = json.dumps(records)
    bad = tmp_path / "bad.fxrec"
    _join(bad, header, body)
    with pytest.raises(fxviz.RecordingFileError, match=r"records\[2\]\.index"):
        fxviz.load(bad)

    records["records"][2]["index"] = 2
    records["records"][2]["value"] = {"t": "tensor", "key": "v999"}
    header["__metadata__"]["fxviz"] = json.dumps(records)
    _join(bad, header, body)
    with pytest.raises(fxviz.RecordingFileError, match="does not hold"):
        fxviz.load(bad)

    header["__metadata__"]["fxviz"] = "{not json"
    _join(bad, header, body)
    with pytest.raises(fxviz.RecordingFileError, match="not valid JSON"):
        fxviz.load(bad)


def test_other_safetensors_files_and_newer_formats_are_refused(saved, tmp_path):
    from safetensors.torch import save_file

    plain = tmp_path / "weights.fxrec"
    save_file({"w": torch.ones(3)}, plain)
    with pytest.raises(fxviz.RecordingFileError, match="not a saved fxviz recording"):
        fxviz.load(plain)
    header, body = _split(saved)
    header["__metadata__"]["version"] = "99"
    newer = tmp_path / "newer.fxrec"
    _join(newer, header, body)
    with pytest.raises(fxviz.RecordingFileError, match="upgrade fxviz"):
        fxviz.load(newer)


def test_values_are_read_on_first_use(saved):
    loaded = fxviz.load(saved)
    stored = loaded["linear1"].stored
    assert stored.kept
    assert stored._tree is not None
    value = loaded["linear1"].value
    assert stored._tree is None
    assert loaded["linear1"].value is value


def test_save_leaves_no_partial_file_on_failure(tmp_path):
    rec = _recording()
    with pytest.raises(FileNotFoundError):
        rec.save(tmp_path / "no-such-dir" / "run.fxrec")
    assert list(tmp_path.iterdir()) == []


def test_load_is_exported_lazily():
    code = "import sys, fxviz; assert 'torch' not in sys.modules; fxviz.load; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_every_dtype_torch_can_hold_round_trips(tmp_path):
    from fxviz._saved._values import STORABLE_DTYPES

    x = torch.randn(3, 4)
    made = {}
    for dtype in sorted(STORABLE_DTYPES, key=str):
        try:
            made[str(dtype)] = x.to(dtype)
        except (RuntimeError, TypeError):  # no conversion (bits, float4): bytes as they are
            made[str(dtype)] = torch.arange(48, dtype=torch.uint8).view(dtype)
    assert {"torch.complex64", "torch.complex128", "torch.uint16"} <= set(made)
    rec = fxviz.record(lambda x: ((x * 1j).exp(), made), x)
    loaded = fxviz.load(rec.save(tmp_path / "dtypes.fxrec"))
    z, values = loaded.output
    assert z.dtype == torch.complex64
    assert torch.equal(z, rec.output[0])
    for name, want in made.items():
        got = values[name]
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), name


def test_only_regular_files_are_opened(tmp_path):
    import threading

    fifo = tmp_path / "pipe.fxrec"
    os.mkfifo(fifo)
    errors = []
    reader = threading.Thread(target=lambda: errors.append(_load_error(fifo)), daemon=True)
    reader.start()
    reader.join(20)
    if reader.is_alive():  # unblock the hung open() before failing
        with open(fifo, "wb"):
            pass
    assert not reader.is_alive(), "loading a FIFO blocked"
    assert "is not a regular file (a FIFO)" in errors[0]
    assert "(a character device)" in _load_error("/dev/null")
    assert "(a directory)" in _load_error(tmp_path)


def _load_error(path):
    with pytest.raises(fxviz.RecordingFileError) as info:
        fxviz.load(path)
    return str(info.value)


def test_a_nul_in_the_path_is_a_clear_error(tmp_path):
    assert "contains a NUL character" in _load_error(f"{tmp_path}/a\0b.fxrec")
    with pytest.raises(fxviz.RecordingFileError, match="contains a NUL character"):
        _recording().save(f"{tmp_path}/a\0b.fxrec")


@pytest.mark.parametrize("version", ["¹", "٣", "1.0", " 1", "", "-1"])
def test_the_format_version_is_ascii_digits(saved, tmp_path, version):
    header, body = _split(saved)
    header["__metadata__"]["version"] = version
    odd = tmp_path / "odd.fxrec"
    _join(odd, header, body)
    assert "recording format" in _load_error(odd)


def test_a_repeated_view_is_bounded_by_what_reading_it_takes(saved, tmp_path):
    header, body = _split(saved)
    records = json.loads(header["__metadata__"]["fxviz"])
    leaf = records["records"][1]["value"]
    records["records"][1]["value"] = {**leaf, "shape": [2**33], "stride": [0]}
    header["__metadata__"]["fxviz"] = json.dumps(records)
    bad = tmp_path / "repeat.fxrec"
    _join(bad, header, body)
    loaded = fxviz.load(bad)
    with pytest.raises(fxviz.RecordingFileError, match="reading it would take"):
        loaded[1].value
    # a real expanded value (stride 0) still round-trips
    rec = fxviz.record(lambda x: x.expand(1000, 3), torch.randn(1, 3))
    again = fxviz.load(rec.save(tmp_path / "expanded.fxrec"))
    assert again.output.stride() == (0, 1)
    assert torch.equal(again.output, rec.output)
