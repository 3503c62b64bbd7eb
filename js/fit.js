// The widget fits its host's output area. marimo caps an output's height (~610 px) and
// scrolls what is taller, so the table under the graph was out of sight, scrolled under
// the graph. Where an ancestor caps the height, the graph (and the side column beside it)
// get what the toolbar, the search bar and a few table rows leave; elsewhere (JupyterLab,
// Notebook 7, the report) the widget keeps its own sizes (widget.css).
const GRAPH_PX = 520; // widget.css's graph height
const MIN_GRAPH_PX = 240;
const TABLE_PX = 220; // widget.css's table height
const MIN_TABLE_PX = 90; // a header and four rows

// The height an ancestor (across shadow roots: marimo mounts widgets in one) lets `el`
// take before it scrolls or clips: its max-height less what sits above `el` in it.
export function heightCap(el) {
  const top = el.getBoundingClientRect().top;
  for (let n = parentOf(el); n; n = parentOf(n)) {
    const style = getComputedStyle(n);
    const max = parseFloat(style.maxHeight);
    if (!Number.isFinite(max) || !/auto|scroll|hidden/.test(style.overflowY)) continue;
    const above = top - n.getBoundingClientRect().top + n.scrollTop;
    return max - above - (parseFloat(style.paddingBottom) || 0) - (parseFloat(style.borderBottomWidth) || 0);
  }
  return null;
}

function parentOf(n) {
  return n.parentElement ?? (n.getRootNode?.() instanceof ShadowRoot ? n.getRootNode().host : null);
}

// Size the graph and table to the host's cap (CSS variables read by widget.css); true when
// the graph's height changed (never again once it fits: no resize loop).
export function fitHost(els) {
  const cap = heightCap(els.root);
  const before = els.root.style.getPropertyValue("--fxviz-graph-height");
  if (cap === null) return false;
  // the toolbar, status, search bar and the gaps between (the table's max height counts)
  const others = els.root.getBoundingClientRect().height - els.main.offsetHeight - els.table.offsetHeight + 8;
  const table = Math.max(MIN_TABLE_PX, Math.min(TABLE_PX, Math.round(0.22 * cap)));
  const graph = Math.round(Math.max(MIN_GRAPH_PX, Math.min(GRAPH_PX, cap - others - table)));
  els.root.style.setProperty("--fxviz-graph-height", `${graph}px`);
  els.root.style.setProperty("--fxviz-table-height", `${table}px`);
  return before !== `${graph}px`;
}
