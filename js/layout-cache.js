// Layouts already made, kept by their DOT: a module opened, closed and opened again (or a
// view shown twice) is drawn from here at once instead of by Graphviz again. Bounded by
// the SVG text it holds; the layout used least recently goes first. No DOM: unit-tested.

export const CACHE_CHARS = 48e6; // about 100 MB of SVG text in a JS string, at most

export function createLayoutCache(limit = CACHE_CHARS) {
  const entries = new Map(); // dot -> svg, in order of last use (oldest first)
  let size = 0;
  return {
    get(dot) {
      if (!entries.has(dot)) return undefined;
      const svg = entries.get(dot);
      entries.delete(dot); // now the most recently used
      entries.set(dot, svg);
      return svg;
    },
    put(dot, svg) {
      const cost = dot.length + svg.length;
      if (cost > limit) return; // larger than the whole cache: never kept
      if (entries.has(dot)) size -= dot.length + entries.get(dot).length;
      entries.delete(dot);
      entries.set(dot, svg);
      size += cost;
      for (const [old, oldSvg] of entries) {
        if (size <= limit) break;
        entries.delete(old);
        size -= old.length + oldSvg.length;
      }
    },
    clear() { entries.clear(); size = 0; },
    get size() { return size; },
    get count() { return entries.size; },
  };
}

// Layouts made before a click (js/peek.js): what opening a box of the view shown would
// show, laid out while the pointer rested on it, or ahead (js/ahead.js). Kept by the exact
// DOT shown and the box: asked for another view, nothing is found, and keeping one for
// another view first forgets the old ones (a layout is never shown over a view it was not
// made from). At most `limit` boxes, the one peeked at least recently going first.
export const PEEKS_KEPT = 8; // a rest's boxes opened ahead (js/ahead.js) and those hovered

export function createPeeks(limit = PEEKS_KEPT) {
  let shown = null; // the DOT the entries were peeked from
  const entries = new Map(); // box title -> { dot, svg }, oldest first
  return {
    get(dotShown, unit) { return dotShown === shown ? entries.get(unit) : undefined; },
    put(dotShown, unit, dot, svg) {
      if (dotShown !== shown) { entries.clear(); shown = dotShown; }
      entries.delete(unit);
      entries.set(unit, { dot, svg });
      while (entries.size > limit) entries.delete(entries.keys().next().value);
    },
    clear() { entries.clear(); shown = null; },
    get count() { return entries.size; },
  };
}

// Where to put the view after a module was opened so the graph seems to open in place:
// the pan that shows `after` (the opened module's frame, in graph units) with its top
// centre where `before` (the clicked box's top centre, in panel pixels) was, at `zoom`.
export function anchoredPan(before, after, zoom) {
  return { x: before.x - (after.x + after.width / 2) * zoom, y: before.y - after.y * zoom };
}

// `pan`, moved so that the nodes seen before a module opened or closed move as little as
// they can: across by the median of their moves, down by the median of the moves of those
// that were above the module (those below make room for what it became). `kept`: [{ was:
// their centre then (panel px), box: in the new view (graph units), above }].
export function steadyPan(pan, kept, zoom) {
  const across = kept.map(({ was, box }) => pan.x + (box.x + box.width / 2) * zoom - was.x);
  const down = kept.filter(({ above }) => above).map(({ was, box }) => pan.y + (box.y + box.height / 2) * zoom - was.y);
  return { x: pan.x - median(across), y: pan.y - median(down) };
}

function median(values) {
  if (!values.length) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// The frame a module's box opens into: the kernel names it in the box's classes
// (`opens-cluster_m_P`, fxviz/render/_dot.py); null for a node that is no module box.
export function frameOf(classNames) {
  const name = [...(classNames ?? [])].find((c) => c.startsWith("opens-"));
  return name ? name.slice("opens-".length) : null;
}
