// Unit tests of search (js/search.js): `npm test`.
import assert from "node:assert/strict";
import test from "node:test";
import { findNodes, searchIndex } from "../search.js";

test("every word must appear, in name, target or module", () => {
  const entries = searchIndex([["linear1", "Linear(1000→100)", "linear1"], ["clamp", "torch.clamp", ""]], []);
  assert.deepEqual(findNodes(entries, "linear"), ["linear1"]);
  assert.deepEqual(findNodes(entries, "torch CLAMP"), ["clamp"]);
  assert.deepEqual(findNodes(entries, "  "), []);
});

test("both passes of a joint graph are found: drawn nodes no name reaches are searched by title", () => {
  const units = { relu: "fw_relu", t: "fw_t", threshold_backward: "bw_threshold_backward" };
  const index = [["relu", "aten.relu.default", ""], ["t", "aten.t.default", ""], ["threshold_backward", "aten.threshold_backward.default", ""], ["t", "aten.t.default", ""]];
  const drawn = ["fw_relu", "fw_t", "bw_t", "bw_threshold_backward"];
  const entries = searchIndex(index, drawn, (name) => units[name] ?? name);
  assert.deepEqual(findNodes(entries, "relu"), ["relu"]);
  assert.deepEqual(findNodes(entries, "t"), ["relu", "t", "threshold_backward", "bw_t"]);
  assert.deepEqual(findNodes(entries, "bw_t"), ["bw_t"]);
});

test("without an index (a saved widget, no kernel), the drawn titles", () => {
  assert.deepEqual(findNodes(searchIndex([], ["x", "relu"]), "re"), ["relu"]);
});
