// The debugger's toolbar, made from the page contract's actions (fxviz/render/_payload.py
// TOOLBAR_ACTIONS): labels, tooltips and keys are Python's; a toggle looks pressed when
// Python says it is on (the `pressed` trait, or the report's replay).
import { h } from "./dom.js";

export function makeButtons(actions, send) {
  const box = h("div", { class: "fxviz-buttons" });
  for (const { type, label, title, key, toggle } of actions) {
    const attrs = { class: `fxviz-btn fxviz-${type}`, title: key ? `${title} (${key})` : title, "data-action": type, onclick: () => send({ type }) };
    if (toggle) attrs["aria-pressed"] = "false";
    box.append(h("button", attrs, label));
  }
  return box;
}

export function showPressed(box, pressed) {
  const on = new Set(pressed || []);
  for (const button of box.querySelectorAll("button[aria-pressed]")) button.setAttribute("aria-pressed", String(on.has(button.dataset.action)));
}

// key -> action type, for the actions that have a key
export function keyMap(actions) {
  return Object.fromEntries(actions.filter((a) => a.key).map((a) => [a.key, a.type]));
}

// The shortcuts, as the help tooltip says them.
export function shortcutHelp(actions, debuggerMode) {
  const lines = ["click the widget, then:", "/  search", "Esc  back to the notebook"];
  if (debuggerMode) for (const a of actions) if (a.key) lines.push(`${a.key}  ${a.title}`);
  return lines.join("\n");
}
