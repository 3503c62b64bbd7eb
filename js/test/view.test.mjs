// Unit tests of the opening view's anchor (js/view.js): `npm test` (node --test).
import assert from "node:assert/strict";
import test from "node:test";
import { drawnBox, fitLabels, openingSpan, shapeBox, topmostNode } from "../view.js";

const node = (name, y, kind, x = 0) => ({
  name,
  classList: { contains: (c) => c === `kind-${kind}` },
  querySelectorAll: () => [{ getAttribute: (key) => String(key === "x" ? x : y) }],
});

test("the view opens on the model's own first node, not an input beside it", () => {
  const nodes = [node("input_ids", 10, "placeholder"), node("embed", 60, "call_module"), node("out", 300, "output")];
  assert.equal(topmostNode(nodes).name, "embed");
  assert.equal(topmostNode([node("x", 10, "placeholder"), node("y", 5, "placeholder")]).name, "y"); // only inputs
  assert.equal(topmostNode([]), null);
});

test("of the model's nodes, the view opens on one an input flows into", () => {
  // an exported graph: an unused `arange` chain drawn on the inputs' rank, far across
  const input = node("input_ids", 10, "placeholder"), view = node("view", 60, "call_function");
  const arange = node("arange_1", 10, "call_function");
  assert.equal(topmostNode([input, arange, view], { fed: new Set([view]) }).name, "view");
  assert.equal(topmostNode([input, arange, view]).name, "arange_1"); // no input drawn flowing
  assert.equal(topmostNode([input, arange], { fed: new Set([input]) }).name, "arange_1"); // fed: an input
  // four inputs flowing into four nodes of the first rank: the one nearest the cursor
  const first = [0, 200, 400, 600].map((x, i) => node(`first_${i}`, 60, "call_function", x));
  const fed = { fed: new Set(first) };
  assert.equal(topmostNode(first, { ...fed, near: first[2] }).name, "first_2");
  assert.equal(topmostNode(first, { ...fed, near: node("below", 200, "call_function", 580) }).name, "first_3");
  assert.equal(topmostNode(first, fed).name, "first_0");
});

// The opening view's span across (graph units): a panel 300 units wide, top-anchored at 0.
const at = (x, y = 0, width = 40, height = 20) => ({ x, y, width, height });
const fits = (boxes) =>
  Math.max(...boxes.map((b) => b.x + b.width)) - Math.min(...boxes.map((b) => b.x)) <= 300 &&
  Math.max(...boxes.map((b) => b.y + b.height)) <= 200;

test("the first view shows the graph's start: the top node with the input nearest it", () => {
  const top = at(500), input = at(300, 40), far = at(900);
  const span = openingSpan({ top, inputs: [input, far], inputUser: at(300, 80) }, fits);
  assert.deepEqual(span, { boxes: [top, input], rank: 2 }); // the far input does not fit too
  // twelve inputs in a row, the model's first node under the last: both, and those beside
  const row = Array.from({ length: 12 }, (_, i) => at(1000 - 60 * i));
  const under = at(1000, 60);
  assert.deepEqual(openingSpan({ top: under, inputs: row }, fits).boxes, [under, ...row.slice(0, 5)]);
});

test("an input too far from the top node is shown with the node it flows into", () => {
  const top = at(900), input = at(0, 100), user = at(60, 160);
  assert.deepEqual(openingSpan({ top, inputs: [input], inputUser: user }, fits), { boxes: [input, user], rank: 3 });
  // an input with no drawn user, or none at all: the top node
  assert.deepEqual(openingSpan({ top, inputs: [input] }, fits), { boxes: [top], rank: 4 });
  assert.deepEqual(openingSpan({ top }, fits), { boxes: [top], rank: 4 });
});

test("the debugger's cursor comes first: beside the top node, else beside its user", () => {
  const top = at(0), cursor = at(200), input = at(-40);
  assert.deepEqual(openingSpan({ top, cursor, inputs: [input] }, fits).boxes, [cursor, top, input]);
  const user = at(700);
  assert.deepEqual(openingSpan({ top, cursor: at(800), cursorUser: user, inputs: [input] }, fits), { boxes: [at(800), user], rank: 1 });
});

// A fake SVG element: attributes only, and no geometry (getBBox throws, as a layout
// would be needed for it): labels must be fitted from what Graphviz wrote.
const el = (tag, attrs, children = []) => ({
  tagName: tag,
  attrs: { ...attrs },
  children,
  getAttribute(name) { return this.attrs[name] ?? null; },
  setAttribute(name, value) { this.attrs[name] = String(value); },
  getBBox() { throw new Error("getBBox: the page was made to lay the SVG out"); },
  closest: () => null,
  querySelector(selector) { return this.querySelectorAll(selector)[0] ?? null; },
  querySelectorAll(selector) {
    const tags = selector.split(",").map((s) => s.trim());
    const found = [];
    const walk = (e) => { for (const c of e.children) { if (tags.includes(c.tagName)) found.push(c); walk(c); } };
    walk(this);
    return found;
  },
  get textContent() { return this.attrs.text ?? ""; },
});

test("a shape's box is read off its attributes: polygon, rounded path, ellipse", () => {
  assert.deepEqual(shapeBox(el("polygon", { points: "98,-62 95,-66 74,-66 71,-62 34,-62 34,-20 98,-20 98,-62" })), { x: 34, y: -66, width: 64, height: 46 });
  assert.deepEqual(shapeBox(el("path", { d: "M10,-5C10,-5 60,-5 60,-5C66,-5 66,-30 60,-30C60,-30 10,-30 10,-30C4,-30 4,-5 10,-5" })), { x: 4, y: -30, width: 62, height: 25 });
  assert.deepEqual(shapeBox(el("ellipse", { cx: "50", cy: "-20", rx: "30", ry: "10" })), { x: 20, y: -30, width: 60, height: 20 });
  assert.throws(() => shapeBox(el("path", { d: "M0,0 L10,10 Z" })), /getBBox/); // not Graphviz's M/C: measured
});

test("labels are fitted into their shapes without the page laying the SVG out", () => {
  const wide = el("text", { x: "40", "text-anchor": "start", "font-size": "11", text: "a label far wider than its box" });
  const fits = el("text", { x: "50", "text-anchor": "middle", "font-size": "11", text: "ok" });
  const node = el("g", {}, [el("polygon", { points: "34,-66 98,-66 98,-20 34,-20" }), wide, fits]);
  fitLabels([node], { measure: (text) => 6 * text.textContent.length });
  assert.equal(wide.getAttribute("text-anchor"), "middle"); // centred on the face
  assert.equal(Number(wide.getAttribute("x")), 66);
  assert.equal(Number(wide.getAttribute("textLength")), 64 - 8); // condensed into it, 4 units clear each side
  assert.equal(fits.getAttribute("textLength"), null); // a label that fits is left alone
  assert.equal(fits.getAttribute("x"), "50");
});

test("a node's box comes from its outline and the graph's translation, with no layout", () => {
  const classed = (e, names) => Object.assign(e, { classList: { contains: (c) => names.includes(c) } });
  const viewport = classed(el("g", {}), ["svg-pan-zoom_viewport"]);
  const graph = classed(el("g", { transform: "scale(1 1) rotate(0) translate(4 9913.64)" }), ["graph"]);
  const outline = el("polygon", { points: "34,-66 98,-66 98,-20 34,-20" });
  const node = classed(el("g", {}, [outline]), ["node"]);
  Object.assign(graph, { parentNode: viewport });
  Object.assign(node, { parentNode: graph });
  Object.assign(outline, { parentNode: node });
  outline.parentNode.closest = () => node;
  const box = drawnBox(node);
  assert.deepEqual({ ...box, y: Math.round(box.y * 100) / 100 }, { x: 38, y: 9847.64, width: 64, height: 46 });
  graph.attrs.transform = "scale(2 2) translate(4 5)"; // not Graphviz's plain translation: measured
  assert.equal(drawnBox(node), null);
});
