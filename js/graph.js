// The graph panel: lays DOT out once per view, then only restyles node states, marks
// search matches and moves the view. `ctx` is the widget (js/widget.js): its model, its
// state (js/state.js), its elements and the page contract.
import svgPanZoom from "svg-pan-zoom";
import { holdBackground, layout } from "./layout.js";
import { parseSvg } from "./parse.js";
import { anchoredPan, frameOf, steadyPan } from "./layout-cache.js";
import { graphElements, reveal, tileGraph } from "./cull.js";
import { whenSized } from "./dom.js";
import { fillLegend, markerFor } from "./legend.js";
import { adoptGraph, currentName, isLatest, restyle, startLayout, unitOf, wantedStates } from "./state.js";
import { T } from "./names.js";
import { drawnBox, fitLabels, isInput, nodeBox, openingView, outlineOf, topmostNode, writtenGroupBox } from "./view.js";

export const MATCH = "fxviz-match";
const SVG_NS = "http://www.w3.org/2000/svg";
export const READABLE_ZOOM = 1.2; // px per SVG unit that makes 10 pt labels 12 px tall

export const unit = (model, name) => unitOf(model.get(T.units), model.get(T.unitsDelta), name);

export function currentTitle(model) {
  const name = currentName(model.get(T.states));
  return name === null ? null : unit(model, name);
}

// The node the view follows: the current one, unless it is still an input (the view
// stays on the model's own first node until the run reaches it); once the run has
// finished (nodes done, none current), the output.
export function followTitle(ctx) {
  const title = currentTitle(ctx.model);
  if (title === null) return finishedTitle(ctx);
  const g = ctx.state.byTitle.get(title);
  return g && !isInput(g) ? title : null;
}

function finishedTitle(ctx) {
  const states = ctx.model.get(T.states) || {};
  if (!Object.values(states).some((list) => list.includes("done"))) return null;
  const { svg, culler } = ctx.state;
  const output = svg ? graphElements(svg, "g.node.kind-output > title", culler)[0] : null;
  return output?.textContent ?? null;
}

// Draw the kernel's DOT, or `peek` ({ dot, svg }: a view laid out before it was asked
// for, js/peek.js), which needs no layout.
export async function draw(ctx, peek = null) {
  const { model, state, els } = ctx;
  const dot = peek?.dot ?? model.get(T.dot);
  if (!dot) return;
  const run = startLayout(state);
  const started = performance.now();
  const release = holdBackground(); // till its frame: layouts made ahead would compete for the CPU
  state.drawnDot = dot;
  state.peeks.clear(); // they open boxes of the view drawn before
  els.root.dataset.drawn = peek ? "peeked" : "sent"; // how the latest view came
  els.graph.querySelector(".fxviz-message")?.replaceChildren("laying out…");
  let text;
  try {
    text = peek?.svg ?? await layout(dot, { timeoutMs: 1000 * (model.get(T.layoutTimeout) || 30) });
  } catch (error) {
    release();
    if (!isLatest(state, run)) return;
    ctx.showError(`${error.message}. Collapse modules (a smaller depth) to draw this graph.`);
    els.graph.querySelector(".fxviz-message")?.replaceChildren("the layout failed (see above)");
    ctx.send({ type: "layout_failed", message: error.message });
    return;
  }
  if (!isLatest(state, run)) { release(); return; } // a newer DOT arrived meanwhile
  const laidOut = stage("layout", started);
  // parsed and made ready off the page (a big graph's far tiles never in it: js/cull.js),
  // in slices (js/parse.js); the graph drawn before stays meanwhile
  const svg = await parseSvg(text);
  if (!isLatest(state, run)) { release(); return; }
  if (!svg) {
    release();
    ctx.showError("the layout gave no SVG to draw");
    return;
  }
  state.panZoom?.destroy();
  ctx.minimap.show(null);
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  ownViewport(svg);
  const byTitle = new Map();
  for (const g of svg.querySelectorAll("g.node")) {
    const title = g.querySelector("title")?.textContent;
    if (title) byTitle.set(title, g);
  }
  adoptGraph(state, svg, byTitle);
  els.root.dataset.nodes = String(byTitle.size); // drawn, in the page or not yet (js/cull.js)
  // read before svg-pan-zoom takes the viewBox over
  const [, , width, height] = (svg.getAttribute("viewBox") || "0 0 1 1").trim().split(/[\s,]+/).map(Number);
  const elongated = !(Math.max(width / height, height / width) <= 12); // a hairline as an image
  fitLabels(byTitle.values());
  // a big graph in tiles, out of the page till a view comes near (js/cull.js)
  state.culler = tileGraph(svg, writtenGroupBox);
  els.graph.replaceChildren(svg);
  let shown = stage("insert", laidOut); // replaced below once the view is open
  // svg-pan-zoom measures the panel: in a panel not laid out yet (an output JupyterLab
  // or Notebook 7 has not shown, a theme switch re-laying the page) every size is 0
  // and the zoom becomes NaN, hiding the graph for good. Open the view once it has a size.
  whenSized(els.graph, () => {
    if (!isLatest(state, run)) return;
    open(ctx, elongated);
    shown = stage("open", shown);
  });
  // time to the first frame showing the new graph, not just to its insertion
  requestAnimationFrame(() => setTimeout(() => {
    release();
    stage("frame", shown);
    model.set(T.renderMs, performance.now() - started);
    model.save_changes();
    // the kernel holds the units back until the first view is on screen (megabytes at
    // 50,000 nodes that the first paint need not wait for): ask for them now
    if (!state.painted) { state.painted = true; ctx.send({ type: "painted" }); }
    ctx.ahead?.painted(); // its boxes in view opened ahead, once the page is idle
    putInRest(state, state.culler);
  }, 0));
}

const PUT_IN_A_FRAME = 4; // tiles put back in the page between two frames (~25 ms of style)

// The tiles of a big graph still out of the page (js/cull.js) put in, hidden, a few a
// frame while it is the graph shown: the page holds every element again, no long task.
function putInRest(state, culler) {
  if (!culler || state.culler !== culler) return;
  if (culler.putInRest(PUT_IN_A_FRAME) > 0) requestAnimationFrame(() => setTimeout(() => putInRest(state, culler), 0));
}

// Where a draw's time goes, as User Timing measures named `fxviz:<stage>` (DevTools'
// performance panel and benchmarks/widget.py read them; only the latest draw's are kept):
// "layout" (the worker's WebAssembly Graphviz, or the cache), "insert" (the SVG text
// parsed into the page, its labels fitted), "open" (the browser styles and lays out the
// new SVG, forced by reading the panel's size; the pan and zoom set), "frame" (to the
// frame that paints it). In a panel sized at once they tile the widget's render_ms.
// Returns the stage's end. A browser without them still draws.
function stage(name, start) {
  const end = performance.now();
  try {
    performance.clearMeasures(`fxviz:${name}`);
    performance.measure(`fxviz:${name}`, { start, end });
  } catch { /* User Timing Level 3 missing: nothing measured */ }
  return end;
}

// What svg-pan-zoom would do to the SVG once the page has laid it out (every element
// moved into one viewport group, overflow hidden), done before: moved after, the whole
// SVG would be styled and laid out a second time.
function ownViewport(svg) {
  const viewport = document.createElementNS(SVG_NS, "g");
  viewport.setAttribute("class", "svg-pan-zoom_viewport");
  viewport.append(...[...svg.childNodes].filter((child) => child.nodeName !== "defs"));
  svg.append(viewport);
  svg.setAttribute("style", "overflow: hidden; ");
}

// Run `then` once the next frame is painted and the tasks already queued for it have run
// (the widget's own render time taken): when the page is idle, or after 200 ms at most.
function afterPaint(then) {
  requestAnimationFrame(() => setTimeout(() => {
    if (globalThis.requestIdleCallback) requestIdleCallback(then, { timeout: 200 });
    else setTimeout(then, 0);
  }, 0));
}

// Before a module opens (its box clicked): where its box is on screen and the zoom, so
// the new view opens the module in place instead of starting over (see `open`).
export function rememberAnchor(ctx, title) {
  const g = ctx.state.byTitle.get(title);
  if (g) remember(ctx.state, g, { frame: frameOf(g.classList) });
}

// Before a module closes (its frame double-clicked): where the frame is on screen and the
// zoom, so the box it closes into takes the frame's place instead of the view starting over.
export function rememberFrame(ctx, title) {
  const g = clusterTitled(ctx.state, title);
  if (g) remember(ctx.state, g, { box: title });
}

// `state.anchor`: what `target` (`g`, the box or frame clicked) becomes, where `g` is on
// screen, the zoom, and the nodes in view to keep still.
function remember(state, g, target) {
  const panZoom = state.panZoom;
  if (!panZoom) return;
  const s = panZoom.getSizes();
  const pan = panZoom.getPan();
  const box = nodeBox(state.svg, g);
  const y = pan.y + box.y * s.realZoom;
  state.anchor = { ...target, zoom: s.realZoom, x: pan.x + (box.x + box.width / 2) * s.realZoom, y, kept: inView(state, g, y) };
}

const KEPT_MAX = 400; // nodes a view change keeps still, at most (read in the click)

// The nodes wholly inside the panel but those in `changing` (the box or frame clicked):
// title -> { centre (panel px), above: over `top` (panel px) }. Read off what Graphviz
// wrote (no layout forced; ~5 µs a node); a node it cannot read so is left out.
function inView(state, changing, top) {
  const s = state.panZoom.getSizes();
  const pan = state.panZoom.getPan();
  const zoom = s.realZoom;
  const kept = new Map();
  for (const [title, g] of state.byTitle) {
    if (kept.size >= KEPT_MAX) break;
    if (changing.contains(g) || g.parentNode?.style?.display === "none") continue; // not painted: js/cull.js
    const b = drawnBox(g);
    if (!b) continue;
    const left = pan.x + b.x * zoom, up = pan.y + b.y * zoom;
    if (left < 0 || up < 0 || left + b.width * zoom > s.width || up + b.height * zoom > s.height) continue;
    kept.set(title, { centre: { x: left + (b.width * zoom) / 2, y: up + (b.height * zoom) / 2 }, above: up + b.height * zoom <= top });
  }
  return kept;
}

// The module boxes drawn and painted (js/cull.js), each with its box in panel px, and the
// panel's size (js/ahead.js opens those in view ahead). Read off what Graphviz wrote.
export function modulesInView(state) {
  const panZoom = state.panZoom;
  if (!panZoom || !state.svg) return { svg: null, boxes: [], panel: { width: 0, height: 0 } };
  const s = panZoom.getSizes();
  const pan = panZoom.getPan();
  const zoom = s.realZoom;
  const boxes = [];
  for (const g of state.svg.querySelectorAll("g.node.fx-module")) {
    if (g.parentNode?.style?.display === "none") continue;
    const b = drawnBox(g);
    if (b) boxes.push({ g, box: { x: pan.x + b.x * zoom, y: pan.y + b.y * zoom, width: b.width * zoom, height: b.height * zoom } });
  }
  return { svg: state.svg, boxes, panel: { width: s.width, height: s.height } };
}

function clusterTitled(state, title) {
  return graphElements(state.svg, "g.cluster", state.culler).find((g) => g.querySelector("title")?.textContent === title) ?? null;
}

// The opened module's frame where its box was (or the box of a closed module where its
// frame was), at the same zoom: true when done.
function openInPlace(ctx, anchor) {
  const { state } = ctx;
  const target = !anchor ? null : anchor.frame ? clusterTitled(state, anchor.frame)
    : graphElements(state.svg, "g.node.fx-module", state.culler).find((g) => frameOf(g.classList) === anchor.box) ?? null;
  if (!target) return false;
  const panZoom = state.panZoom;
  panZoom.zoom((anchor.zoom / panZoom.getSizes().realZoom) * panZoom.getZoom());
  const sizes = panZoom.getSizes();
  const box = nodeBox(state.svg, target);
  // the rest of the view as still as it can be, then the module moved into the panel
  const kept = [...anchor.kept ?? []].map(([title, { centre, above }]) => {
    const g = state.byTitle.get(title);
    return { was: centre, box: g && drawnBox(g), above };
  }).filter(({ box: b }) => b);
  const pan = keptInside(steadyPan(anchoredPan(anchor, box, sizes.realZoom), kept, sizes.realZoom), box, sizes);
  panZoom.pan(anchor.frame ? firstRowInside(state, pan, box, sizes) : boxInside(pan, box, sizes));
  return true;
}

// `pan`, moved up or down as little as needed for `box` (graph units) to be wholly inside
// the panel when it fits in its height: the box a frame closed into, where keeping the
// nodes in view still would put it out of sight (under a graph of 40 modules side by
// side, ~500 px below the panel).
function boxInside(pan, box, { realZoom: zoom, height }) {
  return { x: pan.x, y: pan.y + shiftInto(pan.y + box.y * zoom, box.height * zoom, height) };
}

// How far (px) a span starting at `start`, `size` long, moves to lie within [0, room):
// 0 when it does already, or cannot (longer than `room`).
function shiftInto(start, size, room) {
  if (size > room) return 0;
  if (start < 0) return -start;
  return Math.min(0, room - (start + size));
}

const ROW_MARGIN = 8; // px left below a frame's first row moved into the panel

// `pan`, moved up just enough for the first row of nodes of `frame` (graph units), and
// so its title, to be wholly inside the panel: a module opened near the panel's bottom
// would else show only its title. Unchanged when that row is inside already (the rest of
// the view stays still); never moves the frame's top above the panel's.
function firstRowInside(state, pan, frame, { realZoom: zoom, height }) {
  if (pan.y + (frame.y + frame.height) * zoom <= height) return pan; // all of it is shown
  const row = firstRowBottom(state, frame) ?? frame.y + frame.height;
  const over = pan.y + row * zoom + ROW_MARGIN - height;
  if (over <= 0) return pan;
  return { x: pan.x, y: pan.y - Math.max(0, Math.min(over, pan.y + frame.y * zoom)) };
}

// The bottom (graph units) of the first row of nodes inside `frame`: the topmost node
// and those beside it; null when none is read (a node Graphviz's text does not give).
function firstRowBottom(state, frame) {
  const right = frame.x + frame.width, bottom = frame.y + frame.height;
  let first = null;
  const inside = [];
  for (const g of state.byTitle.values()) {
    const b = drawnBox(g);
    if (!b || b.x < frame.x || b.x + b.width > right || b.y < frame.y || b.y + b.height > bottom) continue;
    inside.push(b);
    if (!first || b.y < first.y) first = b;
  }
  if (!first) return null;
  return Math.max(...inside.filter((b) => b.y < first.y + first.height).map((b) => b.y + b.height));
}

// `pan`, moved across as little as needed for `box` (graph units) to be wholly inside the
// panel when it fits in its width: a frame wider than the box it opened from would else
// run off the panel's side.
function keptInside(pan, box, { realZoom: zoom, width }) {
  return { x: pan.x + shiftInto(pan.x + box.x * zoom, box.width * zoom, width), y: pan.y };
}

// The drawn edges' ends, as [tail, head] node titles (edge titles read "tail:port->head").
function* edgeEnds(state) {
  for (const t of graphElements(state.svg, "g.edge > title", state.culler)) {
    const [tail, head] = t.textContent.split("->");
    yield [tail?.split(":")[0], head?.split(":")[0]];
  }
}

// The first drawn node an edge from `title` goes into.
function firstUser(state, title) {
  for (const [tail, head] of edgeEnds(state)) if (tail === title) return state.byTitle.get(head) ?? null;
  return null;
}

// The nodes drawn that an input flows into (one pass over the edges drawn).
function fedByInputs(state) {
  const fed = new Set();
  for (const [tail, head] of edgeEnds(state)) {
    const from = state.byTitle.get(tail);
    const to = from && isInput(from) ? state.byTitle.get(head) : null;
    if (to) fed.add(to);
  }
  return fed;
}

// The input nodes drawn, each with the node it flows into first (found when asked).
function inputsOf(state) {
  return [...state.byTitle].filter(([, g]) => isInput(g)).map(([title, g]) => ({ g, user: () => firstUser(state, title) }));
}

function open(ctx, elongated) {
  const { model, state, els } = ctx;
  state.panZoom = svgPanZoom(state.svg, {
    zoomEnabled: true, controlIconsEnabled: false, fit: true, center: true, minZoom: 0.02, maxZoom: 5000,
    dblClickZoomEnabled: false, onPan: () => moved(ctx), onZoom: () => moved(ctx),
  });
  const anchor = state.anchor;
  state.anchor = null;
  const cursorTitle = currentTitle(model);
  const cursor = cursorTitle && state.byTitle.get(cursorTitle);
  const top = topmostNode(state.byTitle.values(), { fed: fedByInputs(state), near: cursor });
  const pair = cursor ? [cursor, isInput(cursor) ? firstUser(state, cursorTitle) : null] : null;
  const opening = openInPlace(ctx, anchor) ? "in place" : openingView(state.panZoom, state.svg, top, { cursor: pair, inputs: inputsOf(state), nodeTexts: graphElements(state.svg, "g.node text", state.culler) });
  els.root.dataset.opening = opening;
  // an overview only where the graph does not fit: over a fitted graph it hides nodes.
  // Drawn once the graph is on screen (js/minimap.js: ~x ms at 3,000 nodes), not before.
  const svg = state.svg;
  if (opening !== "fit" && state.byTitle.size > 150 && !elongated) afterPaint(() => { if (state.svg === svg) ctx.minimap.show(svg, state.culler); });
  const current = followTitle(ctx);
  // the cursor in view too: moved to only when the opening view (on the top node) misses it
  if (opening !== "in place" && current) focusOn(ctx, current, null, { always: false });
  cull(ctx); // the tiles of a big graph near this view shown: until now none was
  fillLegend(els.legend, state.byTitle.values(), { withStates: ctx.debuggerMode(), contract: ctx.contract() });
  ctx.updateMatches();
  applyStates(ctx);
  ctx.showError(model.get(T.error));
}

// After any pan or zoom: the overview's frame, and which parts of a big graph are painted.
function moved(ctx) {
  ctx.minimap.update();
  ctx.ahead?.rest();
  cull(ctx);
}

// Show the tiles of a big graph near the panel's view, hide the others (js/cull.js).
function cull(ctx) {
  const { state } = ctx;
  const panZoom = state.panZoom;
  if (!state.culler || !panZoom) return;
  const s = panZoom.getSizes();
  const pan = panZoom.getPan();
  state.culler.update({ x: -pan.x / s.realZoom, y: -pan.y / s.realZoom, width: s.width / s.realZoom, height: s.height / s.realZoom });
}

// Centre the view on a node (zoomed in to at least `zoom` px per unit when given),
// unless `always` is false and it is already well inside the panel.
export function focusOn(ctx, title, zoom, { always = true } = {}) {
  const { state } = ctx;
  const g = title && state.byTitle.get(title);
  const panZoom = state.panZoom;
  if (!g || !panZoom) return;
  const sizes = panZoom.getSizes();
  if (zoom) panZoom.zoom(Math.max(sizes.realZoom, zoom) / sizes.realZoom * panZoom.getZoom());
  const s = panZoom.getSizes();
  const box = nodeBox(state.svg, g);
  const x = box.x + box.width / 2;
  const y = box.y + box.height / 2;
  const pan = panZoom.getPan();
  const left = pan.x + box.x * s.realZoom, top = pan.y + box.y * s.realZoom;
  const inside = left >= 0 && top >= 0 && left + box.width * s.realZoom <= s.width && top + box.height * s.realZoom <= s.height;
  if (!always && inside) return;
  panZoom.pan({ x: s.width / 2 - x * s.realZoom, y: s.height / 2 - y * s.realZoom });
}

// Node states as classes (and badges), changing only the nodes whose states changed.
export function restyleNodes(ctx) {
  const { model, state } = ctx;
  if (!state.svg) return;
  const wanted = wantedStates(model.get(T.states), model.get(T.selected), (name) => unit(model, name), (title) => state.byTitle.has(title));
  const tag = ctx.contract().texts?.nonfinite_tag ?? "NaN";
  for (const { title, add, remove, states } of restyle(state, wanted)) {
    const g = state.byTitle.get(title);
    g.classList.remove(...remove);
    g.classList.add(...add);
    for (const marker of state.markers.get(title) ?? []) marker.remove();
    state.markers.delete(title);
    for (const badge of ["breakpoint", "nonfinite"]) {
      if (!states.has(badge)) continue;
      reveal(g); // measured below
      const outline = outlineOf(g);
      const marker = outline && markerFor(badge, outline.getBBox(), 1, tag);
      if (!marker) continue;
      (outline.parentNode || g).append(marker);
      state.markers.set(title, [...(state.markers.get(title) ?? []), marker]);
    }
  }
}

export function applyStates(ctx) {
  restyleNodes(ctx);
  ctx.renderPanels();
}

export function markMatches(ctx) {
  const { model, state } = ctx;
  for (const g of state.byTitle.values()) g.classList.remove(MATCH);
  for (const name of state.matches) state.byTitle.get(unit(model, name))?.classList.add(MATCH);
}
