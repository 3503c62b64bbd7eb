// The offline HTML report: the notebook widget's front end, driven by recorded data
// instead of a kernel. A small in-page model answers the widget's get/set/on/send, and
// a replay steps through the recorded run (forward, back, to breakpoints) in the page.
import widget from "./widget.js";

class PageModel {
  constructor(state, onMessage) {
    this.state = state;
    this.handlers = new Map();
    this.onMessage = onMessage;
  }
  get(key) { return this.state[key]; }
  set(key, value) {
    this.state[key] = value;
    for (const handler of this.handlers.get(`change:${key}`) ?? []) handler();
  }
  on(event, handler) {
    if (!this.handlers.has(event)) this.handlers.set(event, []);
    this.handlers.get(event).push(handler);
  }
  send(message) { this.onMessage(message); }
  save_changes() {}
}

class Replay {
  constructor(data, model) {
    this.data = data;
    this.model = model;
    this.order = data.order;
    this.pos = 0;
    this.reason = "start";
    this.breakpoints = new Set();
    this.breakNan = false;
    this.failed = this.order.findIndex((name) => data.records[name]?.error);
  }
  done() { return this.pos >= this.order.length; }
  stoppedAtError() { return this.failed >= 0 && this.pos === this.failed; }
  advance() {
    if (this.done() || this.stoppedAtError()) return false;
    this.pos += 1;
    if (this.failed >= 0 && this.pos > this.failed) this.pos = this.failed;
    return true;
  }
  act(type) {
    const sel = this.model.get("selected");
    if (type === "step") { this.advance(); this.reason = "step"; }
    else if (type === "step10") { for (let i = 0; i < 10 && this.advance(); i++); this.reason = "step"; }
    else if (type === "back") { this.pos = Math.max(0, this.pos - 1); this.reason = "back"; }
    else if (type === "restart") { this.pos = 0; this.reason = "start"; }
    else if (type === "continue") this.continue_();
    else if (type === "run_to_selected" && sel) { const i = this.order.indexOf(sel); if (i >= 0) { this.pos = this.failed >= 0 ? Math.min(i, this.failed) : i; this.reason = `run_to ${sel}`; } }
    else if (type === "toggle_breakpoint" && sel) { this.breakpoints.has(sel) ? this.breakpoints.delete(sel) : this.breakpoints.add(sel); }
    else if (type === "break_nan") this.breakNan = !this.breakNan;
    this.publish();
  }
  continue_() {
    while (this.advance()) {
      const last = this.data.records[this.order[this.pos - 1]];
      if (this.breakNan && last?.nonfinite) { this.reason = "nonfinite"; return; }
      if (this.done()) { this.reason = "end"; return; }
      if (this.breakpoints.has(this.order[this.pos])) { this.reason = "breakpoint"; return; }
    }
    this.reason = this.stoppedAtError() ? "error" : "end";
  }
  goto(pos) { this.pos = Math.max(0, Math.min(this.order.length, pos)); this.reason = "timeline"; this.publish(); }
  publish() {
    const states = Object.create(null); // node names are user data: "__proto__" included
    this.order.forEach((name, i) => {
      const list = [i < this.pos ? "done" : i === this.pos ? (this.stoppedAtError() ? "error" : "current") : "pending"];
      if (i < this.pos && this.data.records[name]?.nonfinite) list.push("nonfinite");
      if (this.breakpoints.has(name)) list.push("breakpoint");
      states[name] = list;
    });
    const count = `${this.pos}/${this.order.length} nodes`;
    const where = this.done() ? `finished — ${count}` : `stopped at '${this.order[this.pos]}' (${this.stoppedAtError() ? "error" : this.reason}) — ${count}`;
    const marks = [...this.breakpoints].map((b) => `at ${b}`).concat(this.breakNan ? ["nonfinite"] : []);
    this.model.set("node_states", states);
    this.model.set("status", `${where} · breakpoints: ${marks.join(", ") || "none"}`);
    this.model.set("rows", this.data.rows.slice(0, Math.min(this.pos + (this.stoppedAtError() ? 1 : 0), this.data.rows.length)));
    this.showSelected();
    this.onChange?.(this.pos);
  }
  // The node the inspector opens on: the selection, else the node that made the replay stop
  // (after a NaN/Inf break, the one that produced it), else the next to run.
  focusNode() {
    const selected = this.model.get("selected");
    if (selected) return selected;
    if (this.reason === "nonfinite" && this.pos > 0) return this.order[this.pos - 1];
    return this.order[Math.min(this.pos, this.order.length - 1)];
  }
  showSelected() {
    const name = this.focusNode();
    const i = this.order.indexOf(name);
    const ran = i >= 0 && (i < this.pos || (i === this.pos && this.stoppedAtError()));
    const info = Object.hasOwn(this.data.inspectors, name) ? this.data.inspectors[name] : null;
    if (!info) { this.model.set("inspector", {}); return; }
    this.model.set("inspector", ran || i < 0 ? info : { name, fields: [...(info.planned ?? []), ["state", "not run yet at this point of the replay"]] });
  }
}

export function mountReport(el, data) {
  let replay = null;
  const model = new PageModel(
    { dot: data.dot, index: data.index ?? [], mode: data.replay ? "debugger" : "graph", selected: "", node_states: {}, units: data.units, inspector: {}, rows: data.rows, status: data.status ?? "", error: "", render_ms: 0, layout_timeout_s: 60 },
    (message) => {
      if (message.type === "toggle_module") openBox(message.unit);
      else if (replay) replay.act(message.type);
    },
  );
  // No kernel to redraw: a collapsed box opens as its own drawing, made when the report
  // was written; "overview" goes back.
  const overviewButton = document.createElement("button");
  Object.assign(overviewButton, { className: "fxviz-btn fxviz-overview", textContent: "◀ overview", title: "back to the whole graph" });
  overviewButton.style.display = "none";
  const expansions = data.expansions ?? {};
  function openBox(title) {
    const opened = Object.hasOwn(expansions, title) ? expansions[title] : null;
    if (!opened) return;
    const units = Object.assign(Object.create(null), data.units);
    for (const [name, id] of opened.nodes) units[name] = id;
    model.state.units = units;
    model.set("dot", opened.dot);
    overviewButton.style.display = "";
  }
  overviewButton.addEventListener("click", () => {
    model.state.units = data.units;
    model.set("dot", data.dot);
    overviewButton.style.display = "none";
  });
  const inspectorOf = (name) => (Object.hasOwn(data.inspectors, name) ? data.inspectors[name] : {});
  model.on("change:selected", () => (replay ? replay.showSelected() : model.set("inspector", inspectorOf(model.get("selected")))));
  if (data.replay) {
    replay = new Replay(data, model);
    const slider = document.createElement("input");
    Object.assign(slider, { type: "range", min: 0, max: data.order.length, value: 0, className: "fxviz-timeline", title: "time travel through the recorded run" });
    slider.addEventListener("input", () => replay.goto(Number(slider.value)));
    replay.onChange = (pos) => { slider.value = String(pos); };
    el.before(slider);
  }
  widget.render({ model, el });
  el.querySelector(".fxviz-search-bar")?.prepend(overviewButton);
  replay?.publish();
  return model;
}

globalThis.fxvizReport = { mountReport };
