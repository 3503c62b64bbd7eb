// The legend: shapes, the target colours of this graph, and every state marker, in HTML
// beside the graph (never panned away). Each sample is a tiny SVG node carrying the same
// classes as the graph's nodes, so the legend is styled by the very rules it explains.
const NS = "http://www.w3.org/2000/svg";

// The sample shape of each node kind; what the legend calls it is Python's (the page
// contract's `kinds`, as the DOT legend says it: fxviz/render/_dot.py KIND_LABELS).
const ROUNDED = "M4 3 H14 Q16 3 16 5 V11 Q16 13 14 13 H4 Q2 13 2 11 V5 Q2 3 4 3 Z";
const SHAPES = {
  placeholder: "M2 7 L9 2 L16 7 L16 13 L2 13 Z",
  output: "M2 3 L16 3 L16 9 L9 14 L2 9 Z",
  call_function: ROUNDED,
  call_method: `${ROUNDED} M2 6 L5 3 M13 3 L16 6 M16 10 L13 13 M5 13 L2 10`,
  call_module: "M2 5 H14 V14 H2 Z M2 5 L4 2 H16 L14 5 M14 14 L16 11 V2",
  get_attr: ROUNDED,
  parameter: ROUNDED,
  buffer: ROUNDED,
  constant: ROUNDED,
  module: "M2 4 H7 L8 2 H12 L13 4 H16 V14 H2 Z",
  stub: "M2 2 H13 L16 5 V14 H2 Z",
};
const OPEN_KEY = "fxviz.legend.open"; // the legend's open/closed state, remembered per browser

// The badges that states add on top of a node's outline (`box`): a breakpoint dot at the
// top-left corner, a "NaN" tag at the top-right. Other states are pure CSS.
export function markerFor(state, box, scale = 1, tagText = "NaN") {
  if (state === "breakpoint") {
    const dot = document.createElementNS(NS, "circle");
    dot.setAttribute("class", "fxviz-marker fxviz-marker-breakpoint");
    dot.setAttribute("cx", box.x + 1);
    dot.setAttribute("cy", box.y + 1);
    dot.setAttribute("r", 5 * scale);
    return dot;
  }
  if (state === "nonfinite") {
    const tag = document.createElementNS(NS, "g");
    tag.setAttribute("class", "fxviz-marker fxviz-marker-nonfinite");
    const w = 22 * scale, h = 11 * scale;
    const rect = document.createElementNS(NS, "rect");
    Object.entries({ x: box.x + box.width - w + 4 * scale, y: box.y - h / 2, width: w, height: h, rx: 3 * scale }).forEach(([k, v]) => rect.setAttribute(k, v));
    const text = document.createElementNS(NS, "text");
    Object.entries({ x: box.x + box.width - w / 2 + 4 * scale, y: box.y + 3.2 * scale, "text-anchor": "middle", "font-size": 8 * scale }).forEach(([k, v]) => text.setAttribute(k, v));
    text.textContent = tagText;
    tag.append(rect, text);
    return tag;
  }
  return null;
}

function sample(classes, path, fill = "#e6e6e6", tagText = "NaN") {
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "-4 -4 26 22");
  svg.setAttribute("class", "fxviz-legend-sample");
  const g = document.createElementNS(NS, "g");
  g.setAttribute("class", `node ${classes}`);
  const shape = document.createElementNS(NS, "path");
  shape.setAttribute("d", path);
  shape.setAttribute("fill", fill);
  shape.setAttribute("stroke", "#333");
  g.append(shape);
  for (const c of classes.split(" ")) {
    const marker = markerFor(c.replace("fxviz-", ""), { x: 2, y: 3, width: 14, height: 10 }, 0.6, tagText);
    if (marker) g.append(marker);
  }
  svg.append(g);
  return svg;
}

function entry(swatch, text) {
  const row = document.createElement("li");
  const label = document.createElement("span");
  label.textContent = text;
  label.title = text;
  row.append(swatch, label);
  return row;
}

function section(title, rows) {
  const box = document.createElement("div");
  const head = document.createElement("div");
  head.className = "fxviz-legend-head";
  head.textContent = title;
  const list = document.createElement("ul");
  list.append(...rows);
  box.append(head, list);
  return box;
}

// What fills this graph's call nodes: target -> colour, read off the laid-out SVG (the
// tooltip's first line is "name: kind target").
function targetColours(nodes, limit) {
  const colours = new Map();
  for (const g of nodes) {
    if (!/kind-call_/.test(g.getAttribute("class") || "")) continue;
    const tip = g.querySelector("a")?.getAttribute("xlink:title") ?? g.querySelector("a")?.getAttribute("title") ?? "";
    const target = tip.split("\n")[0].replace(/^[^:]*:\s*call_\w+\s*/, "").trim();
    const fill = g.querySelector("polygon, path, ellipse")?.getAttribute("fill");
    if (!target || !fill || colours.has(target)) continue;
    colours.set(target, fill);
    if (colours.size >= limit) break;
  }
  return colours;
}

// Short names that stay distinct: the last dotted part of each target, more parts where
// two would read the same ("linear" for torch._C._nn.linear, never "torch.nn.function…").
export function shortNames(targets) {
  const parts = targets.map((t) => (/^[A-Za-z_][\w.]*$/.test(t) ? t.split(".") : [t])); // a dotted path, not "Dropout(p=0.5)"
  const depth = parts.map(() => 1);
  for (let round = 0; round < 6; round++) {
    const names = parts.map((p, i) => p.slice(-depth[i]).join("."));
    const seen = new Map();
    names.forEach((n, i) => seen.set(n, [...(seen.get(n) ?? []), i]));
    let clash = false;
    for (const idx of seen.values()) if (idx.length > 1) for (const i of idx) if (depth[i] < parts[i].length) { depth[i] += 1; clash = true; }
    if (!clash) return names;
  }
  return parts.map((p, i) => p.slice(-depth[i]).join("."));
}

// Fill `box` with the legend for the nodes drawn; `withStates` for the debugger/replay.
// Closed until the person opens it (remembered): the inspector comes first.
export function fillLegend(box, nodes, { withStates, contract }) {
  const list = [...nodes];
  const kinds = new Set();
  for (const g of list) {
    for (const c of g.classList) if (c.startsWith("kind-")) kinds.add(c.slice(5));
    if (g.classList.contains("fx-module")) kinds.add("module");
    if (g.classList.contains("fx-stub")) kinds.add("stub");
  }
  const labels = contract.kinds || {};
  const tag = contract.texts?.nonfinite_tag ?? "NaN";
  const parts = [];
  const shapes = Object.entries(SHAPES).filter(([kind]) => kinds.has(kind));
  if (shapes.length) parts.push(section("shapes", shapes.map(([kind, path]) => entry(sample("fx-node", path), labels[kind] ?? kind))));
  const fill = contract.fill || { title: "fill: the operation", rows: null };
  const colours = fill.rows ? new Map() : targetColours(list, 12);
  if (fill.rows) {  // this view's fill has a meaning of its own (a comparison: agreement)
    parts.push(section(fill.title, fill.rows.map(([colour, text]) => entry(sample("fx-node", SHAPES.call_function, colour), text))));
  }
  if (colours.size) {
    const targets = [...colours.keys()];
    const names = shortNames(targets);
    const rows = targets.map((target, i) => {
      const row = entry(sample("fx-node", SHAPES.call_function, colours.get(target)), names[i]);
      row.title = target;
      return row;
    });
    parts.push(section(fill.title, rows));
  }
  if (withStates) {
    const rows = (contract.states || []).map(([state, text]) => entry(sample(`fxviz-${state}`, SHAPES.call_function, "#cfe3f7", tag), text));
    parts.push(section("states (they combine)", rows));
  }
  const details = document.createElement("details");
  details.open = readOpen();
  details.addEventListener("toggle", () => writeOpen(details.open));
  const summary = document.createElement("summary");
  summary.textContent = "legend";
  details.append(summary, ...parts);
  box.replaceChildren(details);
}

function readOpen() {
  try { return globalThis.localStorage?.getItem(OPEN_KEY) === "1"; } catch { return false; }
}
function writeOpen(open) {
  try { globalThis.localStorage?.setItem(OPEN_KEY, open ? "1" : "0"); } catch { /* storage refused (sandboxed page) */ }
}
