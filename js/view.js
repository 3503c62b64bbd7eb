// How a freshly laid-out graph is first shown, and labels kept inside their shapes.
// Graphviz's SVG is in points with no width/height left: one SVG unit = realZoom CSS px.
import { placeOf, reveal } from "./cull.js";

export const READABLE_PX = 12; // smallest node text, in CSS px, at the opening zoom
const LABEL_PAD = 4; // SVG units kept between a label and its shape's edge (~5 px when readable)

// The smallest font size of the node labels (edge labels excluded), in SVG units; `texts`:
// the node labels (those of tiles out of the page too, js/cull.js).
export function smallestNodeFont(svg, texts = svg.querySelectorAll("g.node text")) {
  let smallest = Infinity;
  for (const text of texts) {
    const size = Number(text.getAttribute("font-size"));
    if (size > 0 && size < smallest) smallest = size;
  }
  return Number.isFinite(smallest) ? smallest : 14;
}

// Open readable: the whole graph if its text is then >= READABLE_PX, else top-anchored at
// a readable zoom (a little above the minimum when the width allows it), across on the
// graph's start (see `openingSpan`): `inputs` ([{ g, user() }]: the input nodes, `user()`
// the node each flows into first) and the top node, or the debugger's `cursor` ([the
// cursor, its first user when the cursor is an input, else null]). The view then shows
// where the data enters, the model's first node and the node the status and the
// inspector name, as much of it as fits.
export function openingView(panZoom, svg, topNode, { cursor = null, inputs = [], nodeTexts = undefined } = {}) {
  const sizes = panZoom.getSizes();
  const box = sizes.viewBox;
  if (!box.width || !box.height) return "fit";
  const readable = READABLE_PX / smallestNodeFont(svg, nodeTexts);
  const whole = Math.min(sizes.width / box.width, sizes.height / box.height);
  const width = sizes.width / box.width;
  if (whole >= readable) { // all of it, readable; a small graph is not blown up beyond 1.5x
    panZoom.fit();
    const cap = readable * 1.5;
    if (panZoom.getSizes().realZoom > cap) panZoom.zoom((cap / panZoom.getSizes().realZoom) * panZoom.getZoom());
    panZoom.center();
    return "fit";
  }
  let zoom = Math.max(readable, Math.min(width, readable * 1.25)); // never beyond the width
  let x = box.x + box.width / 2; // centred when the graph fits the panel's width
  if (box.width * zoom > sizes.width && topNode) {
    const boxOf = (g) => (g ? nodeBox(svg, g) : null);
    const [at, atUser] = (cursor ?? []).map(boxOf);
    const near = nearest(inputs.map(({ g, user }) => ({ box: boxOf(g), user })), boxOf(topNode));
    const start = { top: boxOf(topNode), cursor: at, cursorUser: atUser, inputs: near.map(({ box: b }) => b), inputUser: near.length ? boxOf(near[0].user()) : null };
    // every box within the panel, across and down (top-anchored), at `z` px per unit
    const fitsAt = (z) => (boxes) =>
      (Math.max(...boxes.map((b) => b.x + b.width)) - Math.min(...boxes.map((b) => b.x))) * z <= sizes.width - 16 &&
      (Math.max(...boxes.map((b) => b.y + b.height)) - box.y) * z <= sizes.height - 16;
    let span = openingSpan(start, fitsAt(zoom));
    const closer = openingSpan(start, fitsAt(readable)); // the readable minimum, if it shows more
    if (closer.rank < span.rank) [span, zoom] = [closer, readable];
    x = (Math.min(...span.boxes.map((b) => b.x)) + Math.max(...span.boxes.map((b) => b.x + b.width))) / 2;
  }
  panZoom.zoom((zoom / sizes.realZoom) * panZoom.getZoom());
  const real = panZoom.getSizes().realZoom;
  panZoom.pan({ x: sizes.width / 2 - x * real, y: 8 - box.y * real });
  return zoom === width ? "width" : "top";
}

// `inputs` ([{ box, user }]) nearest `to` first, across (the view is top-anchored).
function nearest(inputs, to) {
  const centre = (b) => b.x + b.width / 2;
  return inputs.filter(({ box }) => box).sort((a, b) => Math.abs(centre(a.box) - centre(to)) - Math.abs(centre(b.box) - centre(to)));
}

// What the first view of a graph too wide for the panel shows across: the first group
// that fits (`fits(boxes)`), in this order: the debugger's cursor beside the top node,
// else beside its first user; the top node beside the input drawn nearest it; that input
// beside the node it flows into; the top node alone. Then, while they fit too, the
// inputs not shown yet, nearest first. Boxes in graph units: `top`, `cursor`,
// `cursorUser`, `inputs` (nearest the top node first), `inputUser` (the first's user);
// any may be null. Returns { boxes, rank } (rank: the group's place in that order).
export function openingSpan({ top, cursor = null, cursorUser = null, inputs = [], inputUser = null }, fits) {
  const input = inputs[0] ?? null;
  const groups = [[cursor, top], [cursor, cursorUser], [top, input], [input, inputUser], [top]];
  const rank = groups.findIndex((group) => group.every(Boolean) && fits(group));
  const boxes = rank < 0 ? [top ?? input].filter(Boolean) : [...groups[rank]];
  for (const other of inputs) if (!boxes.includes(other) && fits([...boxes, other])) boxes.push(other);
  return { boxes, rank: rank < 0 ? groups.length : rank };
}

// A node's box in the graph's own (untransformed) coordinates.
export function nodeBox(svg, g) {
  const own = drawnBox(g);
  if (own) return own;
  reveal(g); // a part of a big graph not painted has no geometry
  const box = g.getBBox();
  const viewport = svg.querySelector(".svg-pan-zoom_viewport");
  const ctm = g.getCTM();
  const base = viewport?.getCTM();
  const local = ctm && base ? base.inverse().multiply(ctm) : null;
  return { x: (local ? local.e : 0) + box.x, y: (local ? local.f : 0) + box.y, width: box.width, height: box.height };
}

// A group's transform that only moves it (as Graphviz writes its graph group's)
export const TRANSLATE = /^\s*(?:scale\(1(?:[\s,]+1)?\)\s*)?(?:rotate\(0\)\s*)?translate\(\s*([-\d.e+]+)[\s,]+([-\d.e+]+)\s*\)\s*$/;

// A node's or a module frame's box read off what Graphviz wrote (its outline's
// coordinates, moved by the translation of the graph's group above it), as shapeBox does:
// no layout is forced to find it (a step keeps its node in view with it). Null where the
// element is no node or frame, or another transform is in the way: then it is measured.
export function drawnBox(g) {
  if (!g.classList?.contains("node") && !g.classList?.contains("cluster")) return null;
  if (g.getAttribute("transform")) return null;
  const outline = outlineOf(g);
  if (!outline || outline.parentNode?.closest?.("g.node, g.cluster") !== g) return null;
  const offset = offsetInViewport(g);
  if (!offset) return null;
  const box = shapeBox(outline);
  return { x: offset.x + box.x, y: offset.y + box.y, width: box.width, height: box.height };
}

// How far the coordinates Graphviz wrote inside `el` are moved in the viewport's: the
// translations of the groups above it (a tile out of the page, js/cull.js: on from the
// comment holding its place). Null where another transform is in the way, or no viewport
// is there yet.
function offsetInViewport(el) {
  let x = 0;
  let y = 0;
  const above = (node) => node.parentNode ?? placeOf(node)?.parentNode;
  for (let up = above(el); !up?.classList?.contains("svg-pan-zoom_viewport"); up = above(up)) {
    if (!up?.getAttribute || up.tagName?.toLowerCase() === "svg") return null;
    const transform = up.getAttribute("transform");
    if (!transform) continue;
    const move = TRANSLATE.exec(transform);
    if (!move) return null;
    x += Number(move[1]);
    y += Number(move[2]);
  }
  return { x, y };
}

// The node drawn highest up (the first rank), the one a top-anchored view starts from.
// The model's own first node is preferred to an input: the view opens on the model, not
// on an input drawn beside empty frames; and of the model's nodes, one an input flows
// into (in `fed`) to one that reads no input (an exported graph's `arange` chains, some
// of them unused, share the first rank with the inputs, far from where the data enters).
// Of several on that rank, the one nearest `near` across (the debugger's cursor).
export function topmostNode(nodes, { fed = new Set(), near = null } = {}) {
  const kinds = [[], [], []]; // fed by an input, another of the model's, an input
  for (const g of nodes) kinds[isInput(g) ? 2 : fed.has(g) ? 0 : 1].push(g);
  const found = kinds.find((k) => k.length) ?? [];
  const centres = found.map(labelCentre);
  const top = Math.min(...centres.map(([, y]) => y));
  const first = found.filter((_, i) => centres[i][1] <= top + 1); // one rank: one centre line
  if (!near || first.length < 2) return first[0] ?? null;
  const [x] = labelCentre(near);
  const across = (g) => Math.abs(labelCentre(g)[0] - x);
  return first.reduce((a, b) => (across(b) < across(a) ? b : a));
}

// The centre of a node's label, read off its text lines (Graphviz centres them on the
// node, and a rank's nodes on one line): no layout is forced to find it.
function labelCentre(g) {
  const lines = g.querySelectorAll("text");
  if (!lines.length) return [0, Infinity];
  const at = (el, key) => Number(el.getAttribute(key));
  return [at(lines[0], "x"), (at(lines[0], "y") + at(lines[lines.length - 1], "y")) / 2];
}

export const isInput = (g) => g.classList.contains("kind-placeholder");

// The outline of a node: its first shape (box3d and folder add decorations after it).
export function outlineOf(g) {
  return g.querySelector("polygon, ellipse, path");
}

// The face a node's label sits on, in its own SVG units: the outline's box, less a box3d's
// depth (its three polylines draw the front face's top-right corner; the outline includes
// the depth drawn behind, which a label must not run into).
export function faceOf(g, outline = outlineOf(g)) {
  const shape = shapeBox(outline);
  const face = { x: shape.x, y: shape.y, right: shape.x + shape.width, bottom: shape.y + shape.height };
  const lines = g.querySelectorAll("polyline");
  if (lines.length === 3) {
    const boxes = [...lines].map(shapeBox);
    face.right = Math.min(...boxes.map((b) => b.x + b.width));
    face.y = Math.max(...boxes.map((b) => b.y));
  }
  return face;
}

export const NUMBER = /-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?/gi;
// a path as Graphviz writes them: M (move) and C (cubic curve) commands only
export const GRAPHVIZ_PATH = /^\s*M[\d\s,.eE+\-MC]*$/;

// A shape's box read off its attributes, where Graphviz writes absolute coordinates: a
// polygon's or polyline's points, an ellipse's centre and radii, a path of M and C
// commands (a rounded box: its curves' control points are its corners). No layout is
// needed for it: getBBox, the fallback, makes the browser lay out the whole new SVG, and
// once more after the labels move.
export function shapeBox(el) {
  return writtenBox(el) ?? el.getBBox();
}

// shapeBox without the fallback: null where the attributes do not tell the box.
function writtenBox(el) {
  const tag = el.tagName?.toLowerCase();
  const at = (name) => el.getAttribute(name) ?? "";
  if (tag === "ellipse") {
    const [cx, cy, rx, ry] = ["cx", "cy", "rx", "ry"].map((name) => Number(at(name)));
    if ([cx, cy, rx, ry].every(Number.isFinite)) return { x: cx - rx, y: cy - ry, width: 2 * rx, height: 2 * ry };
  }
  if (tag === "text") return textBox(el);
  const text = tag === "path" ? at("d") : tag === "polygon" || tag === "polyline" ? at("points") : null;
  if (text && (tag !== "path" || GRAPHVIZ_PATH.test(text))) {
    const numbers = text.match(NUMBER)?.map(Number) ?? [];
    if (numbers.length >= 2 && numbers.length % 2 === 0) {
      let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
      for (let i = 0; i < numbers.length; i += 2) {
        left = Math.min(left, numbers[i]);
        right = Math.max(right, numbers[i]);
        top = Math.min(top, numbers[i + 1]);
        bottom = Math.max(bottom, numbers[i + 1]);
      }
      return { x: left, y: top, width: right - left, height: bottom - top };
    }
  }
  return null;
}

// A label's box from its anchor point, its font size and its width in the page's font.
function textBox(text) {
  const x = Number(text.getAttribute("x"));
  const y = Number(text.getAttribute("y"));
  if (!text.hasAttribute("x") || !text.hasAttribute("y") || !Number.isFinite(x) || !Number.isFinite(y)) return null;
  const size = Number(text.getAttribute("font-size")) || 14;
  const width = Number(text.getAttribute("textLength")) || textWidth(text);
  const anchor = text.getAttribute("text-anchor") || "start";
  const left = anchor === "middle" ? x - width / 2 : anchor === "end" ? x - width : x;
  return { x: left, y: y - size, width, height: size * 1.3 };
}

const union = (a, b) => {
  const x = Math.min(a.x, b.x), y = Math.min(a.y, b.y);
  return { x, y, width: Math.max(a.x + a.width, b.x + b.width) - x, height: Math.max(a.y + a.height, b.y + b.height) - y };
};

// The box of a group of graph elements (a tile of js/cull.js: nodes, edges, module frames)
// in the viewport's coordinates, read off what Graphviz wrote, before the page lays the SVG
// out: a node or frame by its outline (its labels are fitted inside), anything else by
// every shape and label in it. Null where some shape's box or the way up to the viewport
// is not written so (then only laying it out would tell).
export function writtenGroupBox(group) {
  const offset = offsetInViewport(group);
  if (!offset) return null;
  let box = null;
  for (const item of group.children) {
    if (item.getAttribute("transform")) return null;
    const framed = item.classList.contains("node") || item.classList.contains("cluster");
    const outline = framed ? outlineOf(item) : null;
    const shapes = outline ? [outline] : item.querySelectorAll("path, polygon, polyline, ellipse, text");
    for (const shape of shapes) {
      if (shape.getAttribute("transform")) return null;
      const b = writtenBox(shape);
      if (!b) return null;
      box = box ? union(box, b) : b;
    }
  }
  return box && { x: box.x + offset.x, y: box.y + offset.y, width: box.width, height: box.height };
}

// Graphviz sized each shape from its own estimate of the label's width; the browser's font
// may be wider. Any label that would come closer than LABEL_PAD to its face's edge is
// centred on the face, and condensed to fit (SVG textLength) if still too wide, so text
// never touches or leaves its node whatever fonts the page has.
export const LABEL_FONT = 'Arial, "Liberation Sans", Helvetica, "Nimbus Sans", sans-serif'; // as in widget.css

let canvas = null;
let canvasFont = "";
const widths = new Map(); // font + text -> width: labels repeat ("9 nodes", a module's name)

// The width the browser gives `text` in the page's label font, measured on a canvas: it
// does not depend on whether the SVG is rendered yet (a notebook output still hidden).
function textWidth(text) {
  const size = Number(text.getAttribute("font-size")) || 14;
  const weight = text.getAttribute("font-weight") === "bold" ? "bold " : "";
  const style = text.getAttribute("font-style") === "italic" ? "italic " : "";
  const font = `${style}${weight}${size}px ${LABEL_FONT}`;
  const key = `${font}\n${text.textContent}`;
  let width = widths.get(key);
  if (width === undefined) {
    canvas ??= document.createElement("canvas").getContext("2d");
    if (canvasFont !== font) canvas.font = canvasFont = font; // parsing a font costs most
    width = canvas.measureText(text.textContent).width;
    if (widths.size > 50000) widths.clear();
    widths.set(key, width);
  }
  return width;
}

export function fitLabels(nodes, { limit = 6000, measure = textWidth } = {}) {
  // every shape read first, every label moved after; shapes are read off their
  // attributes (shapeBox), so the browser need not lay the new SVG out for this
  const faces = [];
  let count = 0;
  for (const g of nodes) {
    if (++count > limit) break;
    const outline = outlineOf(g);
    if (!outline) continue;
    const face = faceOf(g, outline);
    if (face.right > face.x) faces.push([g, face]);
  }
  for (const [g, face] of faces) {
    const left = face.x + LABEL_PAD;
    const right = face.right - LABEL_PAD;
    for (const text of g.querySelectorAll("text")) {
      if (text.closest(".fxviz-marker")) continue;
      const width = measure(text);
      const x = Number(text.getAttribute("x"));
      const anchor = text.getAttribute("text-anchor") || "start";
      const start = anchor === "middle" ? x - width / 2 : anchor === "end" ? x - width : x;
      if (start >= left && start + width <= right) continue;
      // centred on the face (as Graphviz centres labels), condensed only if still too wide
      text.setAttribute("text-anchor", "middle");
      text.setAttribute("x", String((left + right) / 2));
      const room = right - left;
      if (!(room > 0) || room >= width) continue; // only ever condensed, never stretched
      text.setAttribute("textLength", String(room));
      text.setAttribute("lengthAdjust", "spacingAndGlyphs");
    }
  }
}
