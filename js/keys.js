// Focus and keys: a click anywhere in the widget gives it the keyboard, its shortcuts
// then reach it and never the notebook around it (JupyterLab, Notebook 7 and marimo
// listen for keys on the document), and Esc hands the keyboard back.

// Focus `root` on any press inside it, except on controls that take the keys themselves.
export function takeFocusOnClick(root) {
  const grab = (event) => {
    if (event.target.closest?.("input, textarea, select, button")) return;
    // after the host's own handlers (a notebook focuses its cell on mousedown). One press
    // queues three of these, and the browser may run a key before them: never take the keys
    // back from a part of the widget that has them by then (the search box "/" opened).
    setTimeout(() => {
      const active = root.getRootNode().activeElement;
      if (active !== root && root.contains(active)) return;
      root.focus({ preventScroll: true });
    }, 0);
  };
  // capture: a part below (the pan/zoom layer, a host's output wrapper) may stop the event
  for (const kind of ["pointerdown", "mousedown", "click"]) root.addEventListener(kind, grab, true);
}

// Keys while the widget (or a control in it) has focus. `keys`: key -> action type;
// `onAction(type)`; `onSearch()` for "/". Every key stops here: none reaches the host.
export function handleKeys(root, { search, keys, enabled, onAction, onSearch }) {
  // Lumino (JupyterLab, Notebook 7) skips its shortcuts for events from inside this
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  root.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      event.preventDefault();
      if (event.target === search && search.value) { search.value = ""; search.dispatchEvent(new Event("input")); return; }
      leave(root);
      return;
    }
    if (event.target === search) { event.stopPropagation(); return; } // typing a query
    if (event.ctrlKey || event.metaKey || event.altKey) return; // the host's (save, copy...)
    event.stopPropagation();
    if (event.key === "/") { event.preventDefault(); onSearch(); return; }
    const type = keys[event.key];
    if (type && enabled()) { event.preventDefault(); onAction(type); }
  });
  // keys typed while focused must not reach handlers listening for keypress/keyup either
  for (const kind of ["keypress", "keyup"]) root.addEventListener(kind, (event) => { if (!event.ctrlKey && !event.metaKey) event.stopPropagation(); });
}

// Give the keyboard back: to the nearest focusable host element (the notebook cell), else none,
// looking up through a shadow root (marimo mounts widgets in one) to its host.
function leave(root) {
  const active = root.getRootNode().activeElement; // the search box, when it had the keys
  if (active && root.contains(active)) active.blur();
  root.blur();
  const up = (el) => el.parentElement ?? el.getRootNode?.().host ?? null;
  let el = up(root);
  while (el && !(el.tabIndex >= 0 || el.classList?.contains("jp-Notebook"))) el = up(el);
  el?.focus?.({ preventScroll: true });
}
