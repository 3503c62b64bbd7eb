// Opening a module before the click. While the pointer rests on a collapsed module's box,
// or as soon as it is pressed on one, the page asks the kernel what opening it would show
// (a `peek_module` message: the kernel's view state stays as it is,
// fxviz/widgets/_graph_view.py), lays that DOT out in the worker and keeps it, for the
// view shown only (state.peeks, js/layout-cache.js). The boxes in view are peeked at the
// same way before anyone points at them, once the page is idle (js/ahead.js). A click on
// the box then draws it, at once when laid out, else as soon as the kernel's answer is
// laid out, while `toggle_module` still goes to the kernel; the kernel's DOT, when it
// comes and is the one drawn, is not laid out again (widget.js). Asked at the press, the
// kernel's answer (~50 ms through the Jupyter server, whose kernel websocket holds a small
// message back until the page acknowledges the one before it: Nagle's algorithm) overlaps
// the press. The kernel says when what it would open changed while the view shown did not
// (`peeks_stale`: a module closed inside a closed one): the peeks kept are then forgotten.
import { layout } from "./layout.js";
import { T } from "./names.js";

export const PEEK_DELAY_MS = 100; // a pointer passing over a box asks for nothing

// Peek at the module boxes the pointer rests on or presses in `ctx.els.graph`; `open(peek)`
// draws a view peeked at ({ dot, svg }, svg null while it is laid out). Returns
// `{ open(unit), ask(g) }`: for a click on box `unit`, and to peek at box `g` now.
export function peekOnHover(ctx, open) {
  const { model, state, els, send } = ctx;
  const asked = new Map(); // request id -> { shown, unit, settle, layoutUpTo, background }
  let clicked = null; // { shown, unit }: a box clicked before the kernel answered its peek
  let nextId = 1;
  let hovered = null;
  let timer = null;
  const current = () => (state.drawnDot === model.get(T.dot) ? state.drawnDot : null);
  const boxOf = (event) => event.target.closest?.("g.node.fx-module") ?? null;
  els.graph.addEventListener("pointerover", (event) => {
    const g = boxOf(event);
    if (g === hovered) return;
    clearTimeout(timer);
    hovered = g;
    if (g) timer = setTimeout(() => ask(g), PEEK_DELAY_MS);
  });
  els.graph.addEventListener("pointerleave", () => { clearTimeout(timer); hovered = null; });
  els.graph.addEventListener("pointerdown", (event) => { // a click may follow: ask now
    clearTimeout(timer);
    const g = boxOf(event);
    if (g) ask(g);
  });
  const pending = (shown, unit) => [...asked.values()].some((r) => r.shown === shown && r.unit === unit);
  // Peek at box `g` of the view shown: its opening's DOT kept, and laid out when no longer
  // than `layoutUpTo` characters (a longer one is laid out if the box is clicked), in the
  // worker's background when `background` (js/layout.js). Returns a promise that settles
  // once that is done, or null when nothing was asked (peeked or asked already, no view).
  function ask(g, { layoutUpTo = Infinity, background = false } = {}) {
    const unit = g.querySelector("title")?.textContent;
    const shown = current(); // none while a new view is on its way or being drawn
    if (!unit || !g.isConnected || shown === null || state.peeks.get(shown, unit) || pending(shown, unit)) return null;
    const id = nextId++;
    let settle;
    const done = new Promise((resolve) => { settle = resolve; });
    asked.set(id, { shown, unit, settle, layoutUpTo, background });
    send({ type: "peek_module", unit, id });
    return done;
  }
  model.on("msg:custom", (message) => {
    if (message?.type === "peeks_stale") { state.peeks.clear(); ctx.ahead?.painted(); return; }
    if (message?.type !== "peeked") return;
    const request = asked.get(message.id);
    asked.delete(message.id);
    const wanted = request && clicked?.shown === request.shown && clicked?.unit === request.unit;
    if (wanted) clicked = null;
    // the kernel answers from the view it last sent: the one shown, if no other came since
    // (another view of the same widget numbers its requests too: the box must match)
    if (!request || request.unit !== message.unit || !message.dot || request.shown !== current()) {
      request?.settle();
      return;
    }
    state.peeks.put(request.shown, request.unit, message.dot, null); // laid out below
    if (wanted) open({ dot: message.dot, svg: null });
    if (!wanted && message.dot.length > request.layoutUpTo) { request.settle(); return; }
    // once, whoever asks for this DOT (js/layout.js); a click on the box meanwhile hurries it
    const laidOut = layout(message.dot, { background: request.background && !wanted });
    laidOut.then((svg) => {
      // kept unless another view came, or the kernel said peeks went stale, meanwhile
      if (request.shown === current() && state.peeks.get(request.shown, request.unit)?.dot === message.dot) {
        state.peeks.put(request.shown, request.unit, message.dot, svg);
      }
    }, () => {}).finally(request.settle); // a peek that fails to lay out: the kernel's DOT goes the usual way
  });
  return {
    // A click on box `unit` of the view shown: its peek drawn, or drawn when the kernel
    // answers it; nothing when none was asked (the kernel's new DOT is drawn then).
    open(unit) {
      const shown = current();
      if (shown === null) return;
      const peek = state.peeks.get(shown, unit);
      if (peek) open(peek);
      else if (pending(shown, unit)) clicked = { shown, unit };
    },
    ask,
  };
}
