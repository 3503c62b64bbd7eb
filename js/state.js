// The widget's mutable state, in one place, and the pure rules that read and change it.
// Nothing here touches the DOM (the laid-out SVG's groups are opaque values in `byTitle`),
// so `node --test js/test/` exercises it without a browser.
import { createPeeks } from "./layout-cache.js";
import { STATE_PREFIX } from "./names.js";

export function createState() {
  return {
    svg: null, // the laid-out graph
    panZoom: null, // svg-pan-zoom on it, once the panel has a size
    culler: null, // which parts of a big graph are painted (js/cull.js), or null
    byTitle: new Map(), // DOT id (the node's <title>) -> its SVG group
    marked: new Map(), // DOT id -> the states it shows as classes
    markers: new Map(), // DOT id -> its breakpoint / NaN badges
    entries: [], // search's index, lower-cased
    matches: [], // node names matching the query, in graph order
    matchIndex: -1, // the match jumped to last
    layoutRun: 0, // bumped per layout: an older one finishing late is dropped
    drawnDot: null, // the DOT of the view drawn (or being drawn)
    peeks: createPeeks(), // boxes of that view opened ahead, while hovered (js/peek.js)
    painted: false, // the first view is on screen (the kernel then sends the units)
    anchor: null, // a module box just clicked: where it was, to open the module in place
    indexAsked: false, // search's index was asked of the kernel
    indexTimedOut: false, // no kernel answered (a saved widget): search the drawn titles
    statesQueued: false, // a restyle is waiting for the next frame
    table: { columns: "", keys: [], body: null, hint: null }, // rows as last shown
  };
}

// Start a layout; `isLatest(state, run)` tells whether a newer one started since.
export function startLayout(state) {
  state.layoutRun += 1;
  return state.layoutRun;
}
export const isLatest = (state, run) => run === state.layoutRun;

// A new SVG replaces the old one: everything keyed by its groups starts over.
export function adoptGraph(state, svg, byTitle) {
  Object.assign(state, { svg, byTitle, marked: new Map(), markers: new Map(), panZoom: null, culler: null });
  state.entries.stale = true;
}

// What draws node `name`: `units` as last sent whole, overridden by `delta` (what changed
// since, as a module opens or closes); a node may be named __proto__.
export function unitOf(units, delta, name) {
  if (delta && Object.hasOwn(delta, name)) return delta[name];
  return units && Object.hasOwn(units, name) ? units[name] : name;
}

// The node a drawn title stands for (the first one a collapsed box gathers).
export function nameOf(units, delta, title) {
  const d = delta || {};
  const u = units || {};
  return Object.keys(d).find((n) => d[n] === title)
    ?? Object.keys(u).find((n) => u[n] === title && !Object.hasOwn(d, n)) ?? title;
}

// The node to run next (or the one that raised), which the view follows. A node only
// linked to the selection (a joint graph's other pass) is highlighted, never followed:
// following it would pan away from the node the person clicked.
export function currentName(states) {
  const names = Object.keys(states || {});
  return names.find((n) => states[n].includes("current") || states[n].includes("error")) ?? null;
}

// title -> set of states for what is drawn: a collapsed box gathers its nodes' states,
// the selection adds "selected". `drawn(title)` says whether a title is on the page.
export function wantedStates(states, selected, unit, drawn) {
  const wanted = new Map();
  const add = (title, state) => {
    if (!drawn(title)) return;
    if (!wanted.has(title)) wanted.set(title, new Set());
    if (state) wanted.get(title).add(state);
  };
  for (const [name, list] of Object.entries(states || {})) for (const state of list) add(unit(name), state);
  if (selected) add(unit(selected), "selected");
  return wanted;
}

// The class changes that take `state.marked` to `wanted`, touching only titles whose
// states changed (a step changes two nodes of 3,000); updates `state.marked`.
// Returns [{title, add: [class], remove: [class], states: Set}].
export function restyle(state, wanted) {
  const changes = [];
  const titles = new Set([...state.marked.keys(), ...wanted.keys()]);
  for (const title of titles) {
    const had = state.marked.get(title) ?? new Set();
    const now = wanted.get(title) ?? new Set();
    if (had.size === now.size && [...now].every((s) => had.has(s))) continue;
    changes.push({
      title,
      add: [...now].filter((s) => !had.has(s)).map((s) => STATE_PREFIX + s),
      remove: [...had].filter((s) => !now.has(s)).map((s) => STATE_PREFIX + s),
      states: now,
    });
    if (now.size) state.marked.set(title, now);
    else state.marked.delete(title);
  }
  return changes;
}

// Move to the next (+1) or previous (-1) match, wrapping; the name, or null.
export function jumpMatch(state, direction) {
  const n = state.matches.length;
  if (!n) return null;
  state.matchIndex = (((state.matchIndex + direction) % n) + n) % n;
  return state.matches[state.matchIndex];
}

export function setMatches(state, names) {
  state.matches = names;
  state.matchIndex = -1;
}
