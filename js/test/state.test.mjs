// Unit tests of the widget's state module (js/state.js): `npm test` (node --test).
import assert from "node:assert/strict";
import test from "node:test";
import {
  adoptGraph, createState, currentName, isLatest, jumpMatch, nameOf, restyle, setMatches, startLayout, unitOf, wantedStates,
} from "../state.js";

test("a node is drawn by its unit, a delta overriding the whole map, __proto__ included", () => {
  const units = { a: "box1", b: "box1", c: "c" };
  assert.equal(unitOf(units, {}, "a"), "box1");
  assert.equal(unitOf(units, { a: "a" }, "a"), "a");
  assert.equal(unitOf(units, {}, "missing"), "missing");
  assert.equal(unitOf({}, {}, "__proto__"), "__proto__");
  assert.equal(nameOf(units, { a: "a" }, "box1"), "b"); // a left the box
  assert.equal(nameOf(units, {}, "zz"), "zz");
});

test("the current node is the one to run next, else the one that raised, else a linked one", () => {
  assert.equal(currentName({ x: ["done"], relu: ["current", "breakpoint"], out: ["pending"] }), "relu");
  assert.equal(currentName({ x: ["done"], mm: ["error"] }), "mm");
  assert.equal(currentName({ fw_relu: ["linked"] }), null); // highlighted, never followed
  assert.equal(currentName({ x: ["done"] }), null);
});

test("a collapsed box gathers its nodes' states and the selection; undrawn titles are left out", () => {
  const units = { a: "box", b: "box", c: "c", gone: "hidden" };
  const wanted = wantedStates(
    { a: ["done"], b: ["current"], c: ["pending"], gone: ["done"] }, "c", (n) => unitOf(units, {}, n), (t) => t !== "hidden",
  );
  assert.deepEqual([...wanted.get("box")].sort(), ["current", "done"]);
  assert.deepEqual([...wanted.get("c")].sort(), ["pending", "selected"]);
  assert.equal(wanted.has("hidden"), false);
});

test("restyling touches only the nodes whose states changed, and forgets cleared ones", () => {
  const state = createState();
  const first = restyle(state, new Map([["a", new Set(["current"])], ["b", new Set(["pending"])]]));
  assert.deepEqual(first.map((c) => c.title).sort(), ["a", "b"]);
  assert.deepEqual(first.find((c) => c.title === "a").add, ["fxviz-current"]);
  // one step: a ran, b is next; an unchanged node c appears in no change
  restyle(state, new Map([["a", new Set(["current"])], ["b", new Set(["pending"])], ["c", new Set(["pending"])]]));
  const step = restyle(state, new Map([["a", new Set(["done"])], ["b", new Set(["current"])], ["c", new Set(["pending"])]]));
  assert.deepEqual(step.map((c) => c.title).sort(), ["a", "b"]);
  const a = step.find((c) => c.title === "a");
  assert.deepEqual([a.add, a.remove], [["fxviz-done"], ["fxviz-current"]]);
  const cleared = restyle(state, new Map());
  assert.deepEqual(cleared.map((c) => c.remove.length), [1, 1, 1]);
  assert.equal(state.marked.size, 0);
});

test("a new graph starts its marks over; an older layout is no longer the latest", () => {
  const state = createState();
  const first = startLayout(state);
  restyle(state, new Map([["a", new Set(["done"])]]));
  const second = startLayout(state);
  assert.equal(isLatest(state, first), false);
  assert.equal(isLatest(state, second), true);
  adoptGraph(state, "svg", new Map([["a", "g"]]));
  assert.equal(state.marked.size, 0);
  assert.equal(state.byTitle.get("a"), "g");
  assert.equal(state.entries.stale, true);
});

test("jumping through matches wraps both ways", () => {
  const state = createState();
  assert.equal(jumpMatch(state, 1), null);
  setMatches(state, ["a", "b", "c"]);
  assert.deepEqual([jumpMatch(state, 1), jumpMatch(state, 1), jumpMatch(state, 1), jumpMatch(state, 1)], ["a", "b", "c", "a"]);
  assert.equal(jumpMatch(state, -1), "c");
  setMatches(state, ["x"]);
  assert.equal(state.matchIndex, -1);
  assert.equal(jumpMatch(state, -1), "x");
});
