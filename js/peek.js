// Opening a module before the click. While the pointer rests on a collapsed module's box,
// the page asks the kernel what opening it would show (a `peek_module` message: the
// kernel's view state stays as it is, fxviz/widgets/_graph_view.py), lays that DOT out in
// the worker and keeps it, for the view shown only (state.peeks, js/layout-cache.js). A
// click on the box then draws it at once while `toggle_module` still goes to the kernel;
// the kernel's DOT, when it comes and is the one drawn, is not laid out again (widget.js).
import { layout } from "./layout.js";
import { T } from "./names.js";

export const PEEK_DELAY_MS = 100; // a pointer passing over a box asks for nothing

// Peek at the module boxes the pointer rests on in `ctx.els.graph`.
export function peekOnHover(ctx) {
  const { model, state, els, send } = ctx;
  const asked = new Map(); // request id -> { shown, unit }
  let nextId = 1;
  let hovered = null;
  let timer = null;
  const current = () => (state.drawnDot === model.get(T.dot) ? state.drawnDot : null);
  els.graph.addEventListener("pointerover", (event) => {
    const g = event.target.closest?.("g.node.fx-module") ?? null;
    if (g === hovered) return;
    clearTimeout(timer);
    hovered = g;
    if (g) timer = setTimeout(() => ask(g), PEEK_DELAY_MS);
  });
  els.graph.addEventListener("pointerleave", () => { clearTimeout(timer); hovered = null; });
  els.graph.addEventListener("pointerdown", () => clearTimeout(timer)); // clicked first: no peek
  function ask(g) {
    const unit = g.querySelector("title")?.textContent;
    const shown = current(); // none while a new view is on its way or being drawn
    if (!unit || !g.isConnected || shown === null || state.peeks.get(shown, unit)) return;
    const id = nextId++;
    asked.set(id, { shown, unit });
    send({ type: "peek_module", unit, id });
  }
  model.on("msg:custom", (message) => {
    if (message?.type !== "peeked") return;
    const request = asked.get(message.id);
    asked.delete(message.id);
    // the kernel answers from the view it last sent: the one shown, if no other came since
    // (another view of the same widget numbers its requests too: the box must match)
    if (!request || request.unit !== message.unit || !message.dot || request.shown !== current()) return;
    layout(message.dot).then((svg) => {
      if (request.shown === current()) state.peeks.put(request.shown, request.unit, message.dot, svg);
    }, () => {}); // a peek that fails to lay out: the click goes the usual way
  });
}

// What opening box `unit` of the view shown looks like, laid out already: { dot, svg },
// or undefined (not peeked at, not laid out yet, or another view on its way).
export function peeked(ctx, unit) {
  const { model, state } = ctx;
  return state.drawnDot === model.get(T.dot) ? state.peeks.get(state.drawnDot, unit) : undefined;
}
