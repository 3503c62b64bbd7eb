// fxviz notebook front end (anywidget): lays DOT out in the browser, then only restyles it.
// State comes from Python as traits (js/names.js); actions go back as custom messages.
// Everything the page must agree on with Python (states, kinds, actions, limits, wording)
// is read from the `contract` trait (fxviz/render/_payload.py page_contract).
import { openAhead } from "./ahead.js";
import { h } from "./dom.js";
import { fitHost } from "./fit.js";
import { applyStates, draw, focusOn, followTitle, markMatches, modulesInView, READABLE_ZOOM, rememberAnchor, rememberFrame, unit } from "./graph.js";
import { renderInspector } from "./inspector.js";
import { handleKeys, takeFocusOnClick } from "./keys.js";
import { overview } from "./minimap.js";
import { T } from "./names.js";
import { peekOnHover } from "./peek.js";
import { findNodes, searchIndex } from "./search.js";
import { createState, jumpMatch, nameOf, setMatches } from "./state.js";
import { markTableSelection, renderTable } from "./table.js";
import { keyMap, makeButtons, shortcutHelp, showPressed } from "./toolbar.js";

function render({ model, el }) {
  const state = createState();
  const contract = () => model.get(T.contract) || {};
  const send = (message) => model.send(message);
  const els = {
    root: h("div", { class: "fxviz", tabindex: "0" }),
    toolbar: h("div", { class: "fxviz-toolbar" }),
    search: h("input", { class: "fxviz-search", type: "search", placeholder: "search nodes: name, target, module (/)" }),
    graph: h("div", { class: "fxviz-graph" }, h("div", { class: "fxviz-message" }, "laying out…")),
    inspector: h("div", { class: "fxviz-inspector" }),
    legend: h("div", { class: "fxviz-legend" }),
    table: h("div", { class: "fxviz-table" }),
    status: h("div", { class: "fxviz-status", role: "status" }),
    errors: h("pre", { class: "fxviz-error-box" }),
    count: h("span", { class: "fxviz-match-count" }),
  };
  const actions = contract().actions || [];
  // the state colours are Python's (fxviz/overlays.py STATE_STYLES), read by widget.css
  for (const [name, colour] of Object.entries(contract().state_colours || {})) els.root.style.setProperty(`--fxviz-state-${name}`, colour);
  els.buttons = makeButtons(actions, send);
  const debuggerMode = () => model.get(T.mode) === "debugger";
  const ctx = {
    model, state, els, send, contract, debuggerMode,
    minimap: overview(els.graph, () => state.panZoom),
    showError(text) { els.errors.textContent = text || ""; els.errors.style.display = text ? "block" : "none"; },
    renderPanels,
    updateMatches,
  };

  const peeks = peekOnHover(ctx, (peek) => draw(ctx, peek)); // modules opened ahead of a click
  ctx.ahead = openAhead(els.root, peeks.ask, () => modulesInView(state)); // ... and those in view

  const help = h("span", { class: "fxviz-help", tabindex: "-1", title: shortcutHelp(actions, debuggerMode()) }, "⌨ keys");
  els.toolbar.append(els.buttons, els.status);
  const fit = h("button", { class: "fxviz-btn fxviz-fit", title: "fit the whole graph in the panel", onclick: () => { state.panZoom?.fit(); state.panZoom?.center(); } }, "fit");
  const prev = h("button", { class: "fxviz-btn fxviz-prev", title: "previous match (shift+Enter)", onclick: () => jump(-1) }, "↑");
  const next = h("button", { class: "fxviz-btn fxviz-next", title: "next match (Enter)", onclick: () => jump(1) }, "↓");
  const tools = h("div", { class: "fxviz-search-bar" }, els.search, prev, next, els.count, fit, ctx.minimap.toggle, help);
  const side = h("div", { class: "fxviz-side" }, els.inspector, els.legend);
  els.main = h("div", { class: "fxviz-main" }, els.graph, side);
  els.root.append(els.toolbar, els.errors, tools, els.main, els.table);
  el.append(els.root);
  // fit the host's output area (marimo caps it): before the first view opens, and again
  // whenever the widget's own height changes (shown at last, the status line appearing)
  const fitToHost = () => { if (fitHost(els)) state.panZoom?.resize(); };
  fitToHost();
  new ResizeObserver(fitToHost).observe(els.root);
  ctx.showError("");

  // status, toolbar, inspector, table selection and pressed toggles: one state, drawn everywhere
  function renderPanels() {
    els.status.textContent = model.get(T.status) || "";
    els.status.style.display = els.status.textContent ? "" : "none";
    els.toolbar.style.display = debuggerMode() ? "flex" : "none";
    showPressed(els.buttons, model.get(T.pressed));
    renderInspector(els.inspector, model.get(T.inspector));
    markTableSelection(els.table, model.get(T.selected));
  }
  function queueStates() {
    if (state.statesQueued) return;
    state.statesQueued = true;
    requestAnimationFrame(() => { state.statesQueued = false; applyStates(ctx); });
  }
  function showTable() {
    const limit = contract().limits?.table_rows ?? Infinity; // the limit is Python's
    renderTable(els.table, state.table, { rows: model.get(T.rows) || [], total: model.get(T.rowsTotal), selected: model.get(T.selected), limit, onSelect: select });
    markTableSelection(els.table, model.get(T.selected));
  }
  function select(name) {
    model.set(T.selected, name);
    model.save_changes();
  }

  els.graph.addEventListener("click", (event) => {
    const g = event.target.closest?.("g.node");
    const title = g?.querySelector("title")?.textContent;
    if (!title) return;
    if (g.classList.contains("fx-module")) {
      rememberAnchor(ctx, title);
      send({ type: "toggle_module", unit: title }); // the kernel's view state follows
      peeks.open(title); // asked for while the pointer rested on it, or at its press
      return;
    }
    select(nameOf(model.get(T.units), model.get(T.unitsDelta), title));
  });
  els.graph.addEventListener("dblclick", (event) => {
    const title = event.target.closest?.("g.cluster")?.querySelector("title")?.textContent;
    if (!title) return;
    rememberFrame(ctx, title); // the box it closes into takes its place
    send({ type: "collapse_cluster", cluster: title });
  });

  function jump(direction) {
    const name = jumpMatch(state, direction);
    if (name === null) return;
    els.count.textContent = `${state.matchIndex + 1} of ${state.matches.length}`;
    select(name);
    focusOn(ctx, unit(model, name), READABLE_ZOOM);
  }
  // Search's index (every node) comes from the kernel when search is first used: at
  // 50,000 nodes it is megabytes that opening the graph need not wait for.
  function askIndex() {
    if (state.indexAsked || (model.get(T.index) || []).length) return;
    state.indexAsked = true;
    send({ type: "index" });
    setTimeout(() => {
      if ((model.get(T.index) || []).length) return;
      state.indexTimedOut = true;
      updateMatches();
    }, 5000);
  }
  function updateMatches() {
    const query = els.search.value;
    const index = model.get(T.index) || [];
    if (query.trim() && !index.length && !state.indexAsked) askIndex();
    if (query.trim() && !index.length && state.indexAsked && !state.indexTimedOut) {
      setMatches(state, []);
      els.count.textContent = "searching…"; // updateMatches runs again when the index arrives
      return;
    }
    if (!state.entries.length || state.entries.stale) {
      const drawn = [...state.byTitle].filter(([, g]) => g.classList.contains("fx-node")).map(([title]) => title);
      state.entries = searchIndex(index, drawn, (name) => unit(model, name));
    }
    setMatches(state, findNodes(state.entries, query));
    const n = state.matches.length;
    els.count.textContent = query.trim() ? `${n} match${n === 1 ? "" : "es"}` : "";
    markMatches(ctx);
    if (n) focusOn(ctx, unit(model, state.matches[0]), null, { always: false }); // bring it into view
  }
  els.search.addEventListener("keydown", (event) => { if (event.key === "Enter") jump(event.shiftKey ? -1 : 1); });
  els.search.addEventListener("input", updateMatches);
  els.search.addEventListener("focus", askIndex); // fetched while the query is typed
  takeFocusOnClick(els.root);
  handleKeys(els.root, { search: els.search, keys: keyMap(actions), enabled: debuggerMode, onAction: (type) => send({ type }), onSearch: () => els.search.focus() });

  // a DOT drawn already (a module opened from a peek, js/peek.js) is not drawn again
  // (its boxes are opened ahead from now: a peek needs the kernel's view to be the one drawn)
  model.on(`change:${T.dot}`, () => { if (model.get(T.dot) !== state.drawnDot) draw(ctx); else ctx.ahead.painted(); });
  for (const trait of [T.states, T.selected, T.inspector, T.status, T.pressed]) model.on(`change:${trait}`, queueStates);
  for (const trait of [T.rows, T.rowsTotal]) model.on(`change:${trait}`, showTable);
  model.on(`change:${T.error}`, () => ctx.showError(model.get(T.error)));
  model.on(`change:${T.index}`, () => { state.entries = []; updateMatches(); });
  // units arrive after the first paint, and as deltas when a module opens or closes
  for (const trait of [T.units, T.unitsDelta]) model.on(`change:${trait}`, () => { markMatches(ctx); queueStates(); });
  // keep the node to run next in view (only panning when it is near an edge or outside)
  model.on(`change:${T.states}`, () => requestAnimationFrame(() => focusOn(ctx, followTitle(ctx), null, { always: false })));
  renderPanels();
  showTable();
  draw(ctx);
  return () => { state.panZoom?.destroy(); state.layoutRun++; ctx.ahead.stop(); };
}

export default { render };
