// Unit tests of the layout cache and of opening a module in place (js/layout-cache.js):
// `npm test` (node --test).
import assert from "node:assert/strict";
import test from "node:test";
import { anchoredPan, createLayoutCache, createPeeks, frameOf, steadyPan } from "../layout-cache.js";

test("a layout made once is found again by its DOT, and a changed DOT is not", () => {
  const cache = createLayoutCache(1000);
  assert.equal(cache.get("digraph { a }"), undefined);
  cache.put("digraph { a }", "<svg>a</svg>");
  assert.equal(cache.get("digraph { a }"), "<svg>a</svg>");
  assert.equal(cache.get("digraph { a; b }"), undefined); // a module opened: laid out anew
  cache.put("digraph { a }", "<svg>a2</svg>"); // the same DOT again replaces, never doubles
  assert.equal(cache.count, 1);
  assert.equal(cache.size, "digraph { a }".length + "<svg>a2</svg>".length);
});

test("past its size the least recently used layout goes first; one too big is never kept", () => {
  const cache = createLayoutCache(30);
  cache.put("d1", "s".repeat(8)); // 10 chars each
  cache.put("d2", "s".repeat(8));
  cache.put("d3", "s".repeat(8));
  assert.equal(cache.get("d1"), "s".repeat(8)); // d1 used: d2 is now the oldest
  cache.put("d4", "s".repeat(8));
  assert.equal(cache.get("d2"), undefined);
  assert.deepEqual(["d1", "d3", "d4"].map((d) => cache.get(d) !== undefined), [true, true, true]);
  assert.equal(cache.size, 30);
  cache.put("huge", "s".repeat(100));
  assert.equal(cache.get("huge"), undefined);
  assert.equal(cache.count, 3); // nothing was pushed out for it
  cache.clear();
  assert.deepEqual([cache.count, cache.size, cache.get("d1")], [0, 0, undefined]);
});

test("an opened module's frame lands where its box was, at the same zoom", () => {
  // the box's top centre was at (400, 120) px; the frame spans x 100..300 from y 50 (graph units)
  const pan = anchoredPan({ x: 400, y: 120 }, { x: 100, y: 50, width: 200, height: 500 }, 2);
  assert.deepEqual(pan, { x: 400 - 200 * 2, y: 120 - 50 * 2 });
  // the frame's top centre, drawn at that pan and zoom, is where the box was
  assert.deepEqual({ x: pan.x + 200 * 2, y: pan.y + 50 * 2 }, { x: 400, y: 120 });
  // the box's classes name its frame (fxviz/render/_dot.py), hashed ids included
  assert.equal(frameOf(["node", "fx-module", "opens-cluster_m_layers__3"]), "cluster_m_layers__3");
  assert.equal(frameOf(new Set(["fx-module", "opens-cluster__h4234e21f80c8"])), "cluster__h4234e21f80c8");
  assert.equal(frameOf(["node", "fx-node", "kind-call_function"]), null);
  assert.equal(frameOf(undefined), null);
});

test("peeks are found for the view they were peeked from only, a few at most", () => {
  const peeks = createPeeks(2);
  peeks.put("X", "module__1", "X+1", "<svg 1>");
  assert.deepEqual(peeks.get("X", "module__1"), { dot: "X+1", svg: "<svg 1>" });
  assert.equal(peeks.get("Y", "module__1"), undefined); // another view shown: never stale
  assert.equal(peeks.get("X", "module__2"), undefined);
  peeks.put("X", "module__2", "X+2", "<svg 2>");
  peeks.get("X", "module__1"); // does not reorder: the oldest peek goes first
  peeks.put("X", "module__3", "X+3", "<svg 3>");
  assert.equal(peeks.count, 2);
  assert.equal(peeks.get("X", "module__1"), undefined);
  peeks.put("Y", "module__1", "Y+1", "<svg>"); // a new view forgets the old one's
  assert.equal(peeks.count, 1);
  assert.equal(peeks.get("X", "module__3"), undefined);
  peeks.clear();
  assert.equal(peeks.get("Y", "module__1"), undefined);
});

test("the rest of the view stays as still as it can when a module opens", () => {
  // at zoom 2: a node above was centred at (100, 40) px, two below at (100, 300) and (100, 380)
  const box = (cx, cy) => ({ x: cx - 10, y: cy - 5, width: 20, height: 10 }); // graph units
  const kept = [
    { was: { x: 100, y: 40 }, box: box(60, 30), above: true }, // drawn 10 px lower, 20 px right
    { was: { x: 100, y: 300 }, box: box(60, 200), above: false }, // pushed down by the frame
    { was: { x: 100, y: 380 }, box: box(61, 240), above: false },
  ];
  const pan = steadyPan({ x: 0, y: 0 }, kept, 2);
  assert.deepEqual(pan, { x: -20, y: -20 }); // across: the median move; down: the one above
  assert.deepEqual({ x: pan.x + 60 * 2, y: pan.y + 30 * 2 }, { x: 100, y: 40 }); // it stays
  // nothing seen before: the pan as it was
  assert.deepEqual(steadyPan({ x: 5, y: 7 }, [], 2), { x: 5, y: 7 });
  // nothing above (the module was the top of the view): only across
  assert.deepEqual(steadyPan({ x: 0, y: 0 }, kept.slice(1), 2), { x: -21, y: 0 });
});
