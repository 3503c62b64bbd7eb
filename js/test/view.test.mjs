// Unit tests of the opening view's anchor (js/view.js): `npm test` (node --test).
import assert from "node:assert/strict";
import test from "node:test";
import { topmostNode } from "../view.js";

const node = (name, y, kind) => ({
  name,
  classList: { contains: (c) => c === `kind-${kind}` },
  querySelector: () => ({ getAttribute: () => String(y) }),
});

test("the view opens on the model's own first node, not an input beside it", () => {
  const nodes = [node("input_ids", 10, "placeholder"), node("embed", 60, "call_module"), node("out", 300, "output")];
  assert.equal(topmostNode(nodes).name, "embed");
  assert.equal(topmostNode([node("x", 10, "placeholder"), node("y", 5, "placeholder")]).name, "y"); // only inputs
  assert.equal(topmostNode([]), null);
});
