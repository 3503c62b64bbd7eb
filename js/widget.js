// fxviz notebook front end (anywidget): lays DOT out in the browser, then only restyles it.
// State comes from Python as traits; actions go back as custom messages.
import svgPanZoom from "svg-pan-zoom";
import { layout } from "./layout.js";
import { STATE_PREFIX, T } from "./names.js";
import { fillLegend, markerFor } from "./legend.js";
import { findNodes, searchIndex } from "./search.js";
import { fitLabels, nodeBox, openingView, outlineOf, topmostNode } from "./view.js";

const MATCH = "fxviz-match";
const TABLE_ROWS = 1000; // as fxviz/widgets/_graph_view.py TABLE_ROWS
const READABLE_ZOOM = 1.2; // px per SVG unit that makes 10 pt labels 12 px tall
const ACTIONS = [
  ["restart", "restart", "start again from the first node"],
  ["back", "◀ back", "back one node (b)"],
  ["step", "step ▶", "step one node (n)"],
  ["step10", "step 10", "step 10 nodes"],
  ["continue", "continue", "run to the next breakpoint (c)"],
  ["run_to_selected", "run to selected", "run until the selected node is next"],
  ["toggle_breakpoint", "● breakpoint", "toggle a breakpoint on the selected node"],
  ["break_nan", "break on NaN/Inf", "stop after the first node that produces NaN or Inf"],
];

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// An overview of big graphs: the whole layout as a small image, the visible part framed;
// a click there centres the view on that point.
function overview(container, getPanZoom) {
  const box = h("div", { class: "fxviz-minimap", title: "overview: click to move there" });
  const image = h("img", { alt: "" });
  const frame = h("div", { class: "fxviz-minimap-frame" });
  box.append(image, frame);
  let url = null;
  const geometry = () => {
    const pz = getPanZoom();
    if (!pz || !image.naturalWidth) return null;
    const s = pz.getSizes();
    const scale = Math.min(box.clientWidth / s.viewBox.width, box.clientHeight / s.viewBox.height);
    const left = (box.clientWidth - s.viewBox.width * scale) / 2;
    const top = (box.clientHeight - s.viewBox.height * scale) / 2;
    return { pz, s, scale, left, top };
  };
  box.addEventListener("click", (event) => {
    const g = geometry();
    if (!g) return;
    const rect = box.getBoundingClientRect();
    const x = (event.clientX - rect.left - g.left) / g.scale;
    const y = (event.clientY - rect.top - g.top) / g.scale;
    g.pz.pan({ x: g.s.width / 2 - x * g.s.realZoom, y: g.s.height / 2 - y * g.s.realZoom });
  });
  return {
    show(svgText) {
      if (url) URL.revokeObjectURL(url);
      url = null;
      box.remove();
      if (!svgText) return;
      url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
      image.onload = () => this.update();
      image.src = url;
      container.append(box);
    },
    update() {
      const g = geometry();
      if (!g) return;
      const pan = g.pz.getPan();
      Object.assign(frame.style, {
        left: `${g.left + (-pan.x / g.s.realZoom) * g.scale}px`,
        top: `${g.top + (-pan.y / g.s.realZoom) * g.scale}px`,
        width: `${(g.s.width / g.s.realZoom) * g.scale}px`,
        height: `${(g.s.height / g.s.realZoom) * g.scale}px`,
      });
    },
  };
}

function render({ model, el }) {
  const send = (message) => model.send(message);
  const root = h("div", { class: "fxviz", tabindex: "0" });
  const toolbar = h("div", { class: "fxviz-toolbar" });
  const search = h("input", { class: "fxviz-search", type: "search", placeholder: "search nodes: name, target, module (/)" });
  const graph = h("div", { class: "fxviz-graph" }, h("div", { class: "fxviz-message" }, "laying out…"));
  const inspector = h("div", { class: "fxviz-inspector" });
  const legend = h("div", { class: "fxviz-legend" });
  const table = h("div", { class: "fxviz-table" });
  const status = h("div", { class: "fxviz-status", role: "status" });
  const errors = h("pre", { class: "fxviz-error-box" });
  const count = h("span", { class: "fxviz-match-count" });
  const buttons = h("div", { class: "fxviz-buttons" });
  for (const [action, label, title] of ACTIONS) {
    buttons.append(h("button", { class: `fxviz-btn fxviz-${action}`, title, "data-action": action, onclick: () => send({ type: action }) }, label));
  }
  toolbar.append(buttons, status);
  const fit = h("button", { class: "fxviz-btn fxviz-fit", title: "fit the whole graph in the panel", onclick: () => { panZoom?.fit(); panZoom?.center(); } }, "fit");
  const prev = h("button", { class: "fxviz-btn fxviz-prev", title: "previous match (shift+Enter)", onclick: () => jump(-1) }, "↑");
  const next = h("button", { class: "fxviz-btn fxviz-next", title: "next match (Enter)", onclick: () => jump(1) }, "↓");
  const tools = h("div", { class: "fxviz-search-bar" }, search, prev, next, count, fit);
  const side = h("div", { class: "fxviz-side" }, legend, inspector);
  root.append(toolbar, errors, tools, h("div", { class: "fxviz-main" }, graph, side), table);
  el.append(root);

  let svg = null;
  let panZoom = null;
  const minimap = overview(graph, () => panZoom);
  let byTitle = new Map();
  let markers = new Map(); // node -> its breakpoint and NaN/Inf tags
  let marked = new Map(); // node -> the states it shows as classes
  let entries = [];
  let matches = [];
  let matchIndex = -1;
  let layoutRun = 0;
  let painted = false;
  let indexAsked = false;
  let indexTimedOut = false; // no kernel answering (a saved widget): search the drawn titles

  const showError = (text) => { errors.textContent = text || ""; errors.style.display = text ? "block" : "none"; };
  showError("");
  const debuggerMode = () => model.get(T.mode) === "debugger";

  async function draw() {
    const dot = model.get(T.dot);
    if (!dot) return;
    const run = ++layoutRun;
    const started = performance.now();
    graph.querySelector(".fxviz-message")?.replaceChildren("laying out…");
    let text;
    try {
      text = await layout(dot, { timeoutMs: 1000 * (model.get(T.layoutTimeout) || 30) });
    } catch (error) {
      if (run !== layoutRun) return;
      showError(`${error.message}. Collapse modules (a smaller depth) to draw this graph.`);
      graph.querySelector(".fxviz-message")?.replaceChildren("the layout failed (see above)");
      send({ type: "layout_failed", message: error.message });
      return;
    }
    if (run !== layoutRun) return; // a newer DOT arrived meanwhile
    panZoom?.destroy();
    panZoom = null;
    minimap.show(null);
    graph.innerHTML = text;
    svg = graph.querySelector("svg");
    marked = new Map();
    markers = new Map();
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    byTitle = new Map();
    for (const g of svg.querySelectorAll("g.node")) {
      const title = g.querySelector("title")?.textContent;
      if (title) byTitle.set(title, g);
    }
    // read before svg-pan-zoom takes the viewBox over
    const [, , width, height] = (svg.getAttribute("viewBox") || "0 0 1 1").trim().split(/[\s,]+/).map(Number);
    const elongated = !(Math.max(width / height, height / width) <= 12); // a hairline as an image
    fitLabels(byTitle.values());
    // svg-pan-zoom measures the panel: in a panel not laid out yet (an output JupyterLab
    // or Notebook 7 has not shown, a theme switch re-laying the page) every size is 0
    // and the zoom becomes NaN, hiding the graph for good. Open the view once it has a size.
    const open = () => {
      panZoom = svgPanZoom(svg, {
        zoomEnabled: true, controlIconsEnabled: false, fit: true, center: true, minZoom: 0.02, maxZoom: 5000,
        dblClickZoomEnabled: false, onPan: () => minimap.update(), onZoom: () => minimap.update(),
      });
      const opening = openingView(panZoom, svg, topmostNode(byTitle.values()));
      root.dataset.opening = opening;
      minimap.show(opening !== "fit" && byTitle.size > 150 && !elongated ? text : null);
      const current = currentTitle();
      if (opening === "top" && current && current !== topmostNode(byTitle.values())?.querySelector("title")?.textContent) focusOn(current, null);
      fillLegend(legend, byTitle.values(), { withStates: debuggerMode() });
      updateMatches();
      applyStates();
      showError(model.get(T.error));
    };
    if (graph.clientWidth > 0 && graph.clientHeight > 0) open();
    else whenSized(graph, () => { if (run === layoutRun) open(); });
    // time to the first frame showing the new graph, not just to its insertion
    requestAnimationFrame(() => setTimeout(() => {
      model.set(T.renderMs, performance.now() - started);
      model.save_changes();
      // the kernel holds the units back until the first view is on screen (megabytes at
      // 50,000 nodes that the first paint need not wait for): ask for them now
      if (!painted) { painted = true; send({ type: "painted" }); }
    }, 0));
  }

  // What draws a node: `units` as last sent whole, overridden by `units_delta` (what
  // changed since, as a module opens or closes); a node may be named __proto__.
  function unitOf(name) {
    const delta = model.get(T.unitsDelta) || {};
    if (Object.hasOwn(delta, name)) return delta[name];
    const units = model.get(T.units) || {};
    return Object.hasOwn(units, name) ? units[name] : name;
  }

  function nameOf(title) {
    const delta = model.get(T.unitsDelta) || {};
    const units = model.get(T.units) || {};
    return Object.keys(delta).find((n) => delta[n] === title)
      ?? Object.keys(units).find((n) => units[n] === title && !Object.hasOwn(delta, n)) ?? title;
  }

  function currentTitle() {
    const states = model.get(T.states) || {};
    const names = Object.keys(states);
    // the node to run next; else a node linked to the selection (a joint graph's other pass)
    const name = names.find((n) => states[n].includes("current") || states[n].includes("error"))
      ?? names.find((n) => states[n].includes("linked"));
    return name === undefined ? null : unitOf(name);
  }

  // Centre the view on a node (zoomed in to at least `zoom` px per unit when given),
  // unless it is already well inside the panel.
  function focusOn(title, zoom, { always = true } = {}) {
    const g = title && byTitle.get(title);
    if (!g || !panZoom) return;
    const sizes = panZoom.getSizes();
    if (zoom) panZoom.zoom(Math.max(sizes.realZoom, zoom) / sizes.realZoom * panZoom.getZoom());
    const s = panZoom.getSizes();
    const box = nodeBox(svg, g);
    const x = box.x + box.width / 2;
    const y = box.y + box.height / 2;
    const pan = panZoom.getPan();
    const left = pan.x + box.x * s.realZoom, top = pan.y + box.y * s.realZoom;
    const inside = left >= 0 && top >= 0 && left + box.width * s.realZoom <= s.width && top + box.height * s.realZoom <= s.height;
    if (!always && inside) return;
    panZoom.pan({ x: s.width / 2 - x * s.realZoom, y: s.height / 2 - y * s.realZoom });
  }

  let statesQueued = false;
  function queueStates() {
    if (statesQueued) return;
    statesQueued = true;
    requestAnimationFrame(() => { statesQueued = false; applyStates(); });
  }

  function applyStates() {
    status.textContent = model.get(T.status) || "";
    status.style.display = status.textContent ? "" : "none";
    toolbar.style.display = debuggerMode() ? "flex" : "none";
    if (!svg) return;
    const states = model.get(T.states) || {};
    const wanted = new Map(); // unit title -> set of states (a collapsed box gathers its nodes')
    for (const [name, list] of Object.entries(states)) {
      const title = unitOf(name);
      if (!byTitle.has(title)) continue;
      if (!wanted.has(title)) wanted.set(title, new Set());
      for (const state of list) wanted.get(title).add(state);
    }
    const selected = model.get(T.selected);
    if (selected && byTitle.has(unitOf(selected))) {
      if (!wanted.has(unitOf(selected))) wanted.set(unitOf(selected), new Set());
      wanted.get(unitOf(selected)).add("selected");
    }
    // Only nodes whose states changed are touched: a step changes two nodes of 3,000, and
    // re-marking all of them restyled the whole graph each step.
    const next = new Map([...wanted].map(([title, set]) => [byTitle.get(title), set]));
    for (const g of marked.keys()) if (!next.has(g)) next.set(g, new Set());
    for (const [g, set] of next) {
      const had = marked.get(g);
      if (had && had.size === set.size && [...set].every((state) => had.has(state))) continue;
      for (const state of had ?? []) if (!set.has(state)) g.classList.remove(`${STATE_PREFIX}${state}`);
      for (const state of set) g.classList.add(`${STATE_PREFIX}${state}`);
      for (const marker of markers.get(g) ?? []) marker.remove();
      markers.delete(g);
      for (const state of ["breakpoint", "nonfinite"]) {
        if (!set.has(state)) continue;
        const outline = outlineOf(g);
        const marker = outline && markerFor(state, outline.getBBox());
        if (!marker) continue;
        (outline.parentNode || g).append(marker);
        markers.set(g, [...(markers.get(g) ?? []), marker]);
      }
      if (set.size) marked.set(g, set);
      else marked.delete(g);
    }
    renderInspector();
    markTableSelection();
  }

  function markTableSelection() {
    const selected = model.get(T.selected);
    for (const tr of table.querySelectorAll("tr[data-name]")) tr.classList.toggle("fxviz-row-selected", tr.dataset.name === selected);
  }

  function renderInspector() {
    const info = model.get(T.inspector) || {};
    inspector.replaceChildren();
    if (!info.name) {
      inspector.append(h("div", { class: "fxviz-hint" }, "click a node to inspect it"));
      return;
    }
    inspector.append(h("div", { class: "fxviz-title" }, info.name));
    const dl = h("dl");
    for (const [key, value] of info.fields || []) dl.append(h("dt", {}, key), h("dd", {}, String(value)));
    inspector.append(dl);
    if (info.histogram?.counts?.length) inspector.append(histogram(info.histogram));
    if (info.preview) inspector.append(h("pre", { class: "fxviz-preview" }, info.preview));
    if (info.error) inspector.append(h("pre", { class: "fxviz-node-error" }, info.error));
  }

  function histogram({ counts, low, high }) {
    const width = 220, height = 48, top = Math.max(...counts, 1), bar = width / counts.length;
    const ns = "http://www.w3.org/2000/svg";
    const chart = document.createElementNS(ns, "svg");
    chart.setAttribute("class", "fxviz-histogram");
    chart.setAttribute("viewBox", `0 0 ${width} ${height + 12}`);
    counts.forEach((count, i) => {
      const r = document.createElementNS(ns, "rect");
      const barHeight = (count / top) * height;
      r.setAttribute("x", i * bar);
      r.setAttribute("y", height - barHeight);
      r.setAttribute("width", Math.max(bar - 1, 1));
      r.setAttribute("height", barHeight);
      chart.append(r);
    });
    for (const [x, text, anchor] of [[0, low, "start"], [width, high, "end"]]) {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", x);
      t.setAttribute("y", height + 11);
      t.setAttribute("text-anchor", anchor);
      t.textContent = Number(text).toPrecision(3);
      chart.append(t);
    }
    return chart;
  }

  // Rows are rebuilt only where they changed: a debugger step adds a row or two, and
  // rebuilding a thousand rows each step held the page for a tenth of a second.
  let tableShown = { columns: "", keys: [], body: null, hint: null };
  function renderTable() {
    const rows = model.get(T.rows) || [];
    if (!rows.length) { table.replaceChildren(); tableShown = { columns: "", keys: [], body: null, hint: null }; return; }
    const columns = Object.keys(rows[0]);
    const selected = model.get(T.selected);
    // a table of tens of thousands of rows freezes the page: the first rows, and a note
    const shownRows = rows.length > TABLE_ROWS ? rows.slice(0, TABLE_ROWS) : rows;
    const total = Math.max(model.get(T.rowsTotal) || 0, rows.length); // the kernel sends the shown rows
    const makeRow = (row) =>
      h("tr", { class: row.name === selected ? "fxviz-row-selected" : "", "data-name": row.name, onclick: () => select(row.name) },
        ...columns.map((c) => h("td", {}, row[c] == null ? "" : String(row[c]))));
    if (tableShown.columns !== columns.join("\n") || !tableShown.body) {
      tableShown = { columns: columns.join("\n"), keys: [], body: h("tbody"), hint: h("div", { class: "fxviz-hint" }) };
      table.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", {}, c)))), tableShown.body));
    }
    const { keys, body, hint } = tableShown;
    shownRows.forEach((row, i) => {
      const key = JSON.stringify(row);
      if (keys[i] === key) return;
      if (i < body.children.length) body.children[i].replaceWith(makeRow(row));
      else body.append(makeRow(row));
      keys[i] = key;
    });
    while (body.children.length > shownRows.length) body.lastChild.remove();
    keys.length = shownRows.length;
    hint.textContent = `… ${total - shownRows.length} more rows: search finds any node`;
    if (total > shownRows.length) table.append(hint);
    else hint.remove();
  }

  function select(name) {
    model.set(T.selected, name);
    model.save_changes();
  }

  graph.addEventListener("click", (event) => {
    const g = event.target.closest?.("g.node");
    if (!g) return;
    const title = g.querySelector("title")?.textContent;
    if (!title) return;
    if (g.classList.contains("fx-module")) {
      send({ type: "toggle_module", unit: title });
      return;
    }
    select(nameOf(title));
  });
  graph.addEventListener("dblclick", (event) => {
    const cluster = event.target.closest?.("g.cluster");
    const title = cluster?.querySelector("title")?.textContent;
    if (title) send({ type: "collapse_cluster", cluster: title });
  });

  function jump(direction) {
    if (!matches.length) return;
    matchIndex = (matchIndex + direction + matches.length) % matches.length;
    count.textContent = `${matchIndex + 1} of ${matches.length}`;
    select(matches[matchIndex]);
    focusOn(unitOf(matches[matchIndex]), READABLE_ZOOM);
  }
  // Search's index (every node) comes from the kernel when search is first used: at
  // 50,000 nodes it is megabytes that opening the graph need not wait for.
  function askIndex() {
    if (indexAsked || (model.get(T.index) || []).length) return;
    indexAsked = true;
    send({ type: "index" });
    setTimeout(() => {
      if ((model.get(T.index) || []).length) return;
      indexTimedOut = true;
      updateMatches();
    }, 5000);
  }
  function updateMatches() {
    const query = search.value;
    const index = model.get(T.index) || [];
    if (query.trim() && !index.length && !indexAsked) askIndex();
    if (query.trim() && !index.length && indexAsked && !indexTimedOut) {
      matches = [];
      count.textContent = "searching…"; // updateMatches runs again when the index arrives
      return;
    }
    if (!entries.length || entries.stale) entries = searchIndex(index, byTitle.keys());
    matches = findNodes(entries, query);
    matchIndex = -1;
    count.textContent = query.trim() ? `${matches.length} match${matches.length === 1 ? "" : "es"}` : "";
    markMatches();
    if (matches.length) focusOn(unitOf(matches[0]), null, { always: false }); // bring it into view
  }
  function markMatches() {
    for (const g of byTitle.values()) g.classList.remove(MATCH);
    for (const name of matches) byTitle.get(unitOf(name))?.classList.add(MATCH);
  }
  search.addEventListener("keydown", (event) => {
    event.stopPropagation();
    if (event.key === "Enter") jump(event.shiftKey ? -1 : 1);
  });
  search.addEventListener("input", updateMatches);
  search.addEventListener("focus", askIndex); // fetched while the query is typed
  root.addEventListener("keydown", (event) => {
    if (event.target === search) return;
    const keys = { n: "step", b: "back", c: "continue" };
    if (event.key === "/") { event.preventDefault(); search.focus(); return; }
    if (keys[event.key] && debuggerMode()) { event.preventDefault(); send({ type: keys[event.key] }); }
  });

  model.on(`change:${T.dot}`, draw);
  for (const trait of [T.states, T.selected, T.inspector, T.status]) model.on(`change:${trait}`, queueStates);
  for (const trait of [T.rows, T.rowsTotal]) model.on(`change:${trait}`, () => { renderTable(); markTableSelection(); });
  model.on(`change:${T.error}`, () => showError(model.get(T.error)));
  model.on(`change:${T.index}`, () => { entries = []; updateMatches(); });
  // units arrive after the first paint, and as deltas when a module opens or closes
  for (const trait of [T.units, T.unitsDelta]) model.on(`change:${trait}`, () => { markMatches(); queueStates(); });
  // keep the node to run next in view (only panning when it is near an edge or outside)
  model.on(`change:${T.states}`, () => requestAnimationFrame(() => focusOn(currentTitle(), null, { always: false })));
  renderTable();
  draw();
  return () => { panZoom?.destroy(); layoutRun++; };
}

// Call `then` once `el` has a non-zero size (at once if it has one).
function whenSized(el, then) {
  const observer = new ResizeObserver(() => {
    if (el.clientWidth > 0 && el.clientHeight > 0) { observer.disconnect(); then(); }
  });
  observer.observe(el);
}

export default { render };
