// The offline HTML report: the notebook widget's front end, driven by recorded data
// instead of a kernel. A small in-page model answers the widget's get/set/on/send, and
// a replay moves a cursor through the recorded run. What each position looks like and
// where each action goes from it were made in Python by the Debugger's own rules
// (fxviz/render/_payload.py): the page only looks positions up.
import { PAYLOAD_VERSION, T } from "./names.js";
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
  // a custom message from "the kernel" (the page itself), a moment later as a kernel's comes
  receive(message) { setTimeout(() => { for (const handler of this.handlers.get("msg:custom") ?? []) handler(message); }, 0); }
  save_changes() {}
}

// The replay: a cursor over positions the Python Debugger produced. Where each action
// goes from a position (`moves`), why "continue" stops there (`stop`, `nonfinite`) and what
// the page shows (`states`, `status`) come from fxviz/render/_payload.py replay_payload;
// the page keeps only the cursor, the person's breakpoints and the NaN/Inf toggle.
class Replay {
  constructor(data, model) {
    this.model = model;
    this.rows = data.rows;
    this.inspectors = data.inspectors;
    ({ order: this.order, steps: this.steps, breakpoints_suffix: this.suffix, start: this.start, positions: this.positions } = data.replay);
    this.pos = this.start;
    this.reason = "start";
    this.breakpoints = new Set();
    this.breakNan = false;
  }
  act(type) {
    const sel = this.model.get(T.selected);
    const moves = this.steps[this.pos].moves;
    if (Object.hasOwn(moves, type)) { this.pos = moves[type]; this.reason = type === "back" ? "back" : "step"; }
    else if (type === "restart") { this.pos = this.start; this.reason = "start"; }
    else if (type === "continue") this.continue_();
    else if (type === "run_to_selected" && sel && this.order.includes(sel)) {
      this.pos = Math.min(this.order.indexOf(sel), this.steps.length - 1);
      this.reason = `run_to ${sel}`;
    } else if (type === "toggle_breakpoint" && sel) {
      if (this.breakpoints.has(sel)) this.breakpoints.delete(sel);
      else this.breakpoints.add(sel);
    } else if (type === "break_nan") this.breakNan = !this.breakNan;
    this.publish();
  }
  // The first later position where the Debugger's continue_ would stop: Python's own
  // stops (error, end), a NaN/Inf when asked, or before a node with a breakpoint.
  continue_() {
    for (let p = this.pos + 1; p < this.steps.length; p++) {
      const step = this.steps[p];
      const reason = step.stop ?? (this.breakNan && step.nonfinite ? "nonfinite" : this.breakpoints.has(this.order[p]) ? "breakpoint" : null);
      if (reason) { this.pos = p; this.reason = reason; return; }
    }
  }
  // The scrubber's i-th position (positions on a parameter fetch are never visited).
  goto(i) {
    this.pos = this.positions[Math.max(0, Math.min(this.positions.length - 1, i))];
    this.reason = "timeline";
    this.publish();
  }
  statesAt(pos) {
    const states = Object.create(null); // node names are user data: "__proto__" included
    for (let p = 0; p <= pos; p++) for (const [name, list] of Object.entries(this.steps[p].states)) states[name] = list;
    for (const name of this.breakpoints) states[name] = [...(states[name] ?? []), "breakpoint"];
    return states;
  }
  publish() {
    const step = this.steps[this.pos];
    const nan = this.model.get(T.contract)?.texts?.nonfinite ?? "nonfinite";
    const marks = [...this.breakpoints].map((b) => `at ${b}`).concat(this.breakNan ? [nan] : []);
    const status = this.reason === "nonfinite" && step.nonfinite_status ? step.nonfinite_status : step.status.replace("{reason}", this.reason);
    this.model.set(T.states, this.statesAt(this.pos));
    this.model.set(T.status, status + this.suffix.replace("{breakpoints}", marks.join(", ") || "none"));
    this.model.set(T.rows, this.rows.slice(0, step.rows ?? this.pos + (step.error ? 1 : 0))); // drawn nodes run so far
    this.showPressed();
    this.showSelected();
    this.onChange?.(this.positions.indexOf(this.pos));
  }
  showPressed() {
    const sel = this.model.get(T.selected);
    this.model.set(T.pressed, [...(this.breakNan ? ["break_nan"] : []), ...(sel && this.breakpoints.has(sel) ? ["toggle_breakpoint"] : [])]);
  }
  // The node the inspector opens on: the selection, else the node that made the replay stop
  // (after a NaN/Inf break, the one that produced it), else the next to run.
  focusNode() {
    const selected = this.model.get(T.selected);
    if (selected) return selected;
    if (this.reason === "nonfinite" && this.pos > 0) return this.order[this.pos - 1];
    return this.order[Math.min(this.pos, this.order.length - 1)];
  }
  showSelected() {
    const name = this.focusNode();
    const i = this.order.indexOf(name);
    const ran = i >= 0 && (i < this.pos || (i === this.pos && this.steps[this.pos].error));
    const info = Object.hasOwn(this.inspectors, name) ? this.inspectors[name] : null;
    if (!info) { this.model.set(T.inspector, {}); return; }
    this.model.set(T.inspector, ran || i < 0 ? info : { name, fields: [...(info.planned ?? []), ["state", "not run yet at this point of the replay"]] });
  }
}

export function mountReport(el, data) {
  if (data.payload_version !== PAYLOAD_VERSION) {
    el.textContent = `this report's data is version ${data.payload_version}, but its page reads version ${PAYLOAD_VERSION}: write it again with one fxviz version`;
    return null;
  }
  let replay = null;
  const model = new PageModel(
    {
      [T.dot]: data.dot, [T.index]: data.index ?? [], [T.mode]: data.replay ? "debugger" : "graph", [T.selected]: "",
      [T.states]: data.node_states ?? {}, [T.units]: data.units, [T.inspector]: {}, [T.rows]: data.rows, [T.status]: data.status ?? "",
      [T.error]: "", [T.renderMs]: 0, [T.layoutTimeout]: 60, [T.contract]: data.contract, [T.pressed]: [],
    },
    (message) => {
      if (message.type === "toggle_module") openBox(message.unit);
      else if (message.type === "peek_module") answerPeek(message);
      else if (replay) replay.act(message.type);
    },
  );
  // No kernel to redraw: a collapsed box opens as its own drawing, made when the report
  // was written (payload "expansions"); "overview" goes back.
  const overviewButton = document.createElement("button");
  Object.assign(overviewButton, { className: "fxviz-btn fxviz-overview", textContent: "◀ overview", title: "back to the whole graph" });
  overviewButton.style.display = "none";
  const expansions = data.expansions ?? {};
  function openBox(title) {
    const opened = Object.hasOwn(expansions, title) ? expansions[title] : null;
    if (!opened) return;
    const units = Object.assign(Object.create(null), data.units);
    for (const [name, id] of opened.nodes) units[name] = id;
    model.state[T.units] = units;
    model.set(T.dot, opened.dot);
    overviewButton.style.display = "";
  }
  // A peek (a pointer resting on a box, or the boxes in view opened ahead: js/peek.js,
  // js/ahead.js) is answered as the kernel answers it: with the drawing a
  // click on that box shows, laid out before the click; none for a box without one.
  function answerPeek({ id, unit }) {
    const dot = Object.hasOwn(expansions, unit) ? expansions[unit].dot : "";
    model.receive({ type: "peeked", id, unit, dot });
  }
  overviewButton.addEventListener("click", () => {
    model.state[T.units] = data.units;
    model.set(T.dot, data.dot);
    overviewButton.style.display = "none";
  });
  const inspectorOf = (name) => (Object.hasOwn(data.inspectors, name) ? data.inspectors[name] : {});
  model.on(`change:${T.selected}`, () => {
    if (!replay) { model.set(T.inspector, inspectorOf(model.get(T.selected))); return; }
    replay.showPressed();
    replay.showSelected();
  });
  if (data.replay) {
    replay = new Replay(data, model);
    const slider = document.createElement("input");
    Object.assign(slider, { type: "range", min: 0, max: replay.positions.length - 1, value: 0, className: "fxviz-timeline", title: "time travel through the recorded run" });
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
