// Graphviz's SVG text made into elements off the page, in slices of about SLICE_CHARS, a
// task each: the 4 MB of a 3,000-node graph held the main thread ~300 ms parsed at once.
// The text is cut between the graph's own elements (module frames, nodes, edges), each of
// which Graphviz starts on a line of its own: `<g id="node12" class="node">`. A text it
// cannot cut so is parsed at once.
const SVG_NS = "http://www.w3.org/2000/svg";
export const SLICE_CHARS = 500_000;
const ITEM = /\n<g id="(?:clust|node|edge)\d+" class="/g;

const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

// Where the graph's elements start in `text`, and where its group closes (the last
// `</g>` before `</svg>`); null when there are none, or not in that order.
export function itemBounds(text) {
  const starts = [...text.matchAll(ITEM)].map((match) => match.index + 1);
  const close = text.lastIndexOf("</g>", text.lastIndexOf("</svg>"));
  if (!starts.length || close < starts.at(-1)) return null;
  return { starts, close };
}

// The cuts of [first start, close) into slices of at least `size` characters, each cut at
// the start of an element: [[from, to], ...].
export function slices({ starts, close }, size = SLICE_CHARS) {
  const cuts = [];
  let from = starts[0];
  for (const start of starts) {
    if (start - from >= size) {
      cuts.push([from, start]);
      from = start;
    }
  }
  cuts.push([from, close]);
  return cuts;
}

// The <svg> element of `text`, parsed off the page; a long text in slices, `between()`
// awaited before each (by default: the next task). Returns null where the text holds no
// <svg>.
export async function parseSvg(text, { size = SLICE_CHARS, between = nextTask } = {}) {
  const bounds = text.length > size ? itemBounds(text) : null;
  if (!bounds) return parseWhole(text);
  const { starts, close } = bounds;
  const svg = parseWhole(text.slice(0, starts[0]) + text.slice(close));
  const graph = svg?.querySelector("g.graph");
  if (!graph) return parseWhole(text);
  for (const [from, to] of slices(bounds, size)) {
    await between();
    const holder = document.createElementNS(SVG_NS, "g");
    holder.innerHTML = text.slice(from, to); // parsed as SVG: the holder is an SVG element
    graph.append(...holder.childNodes);
  }
  return svg;
}

function parseWhole(text) {
  const holder = document.createElement("div");
  holder.innerHTML = text;
  return holder.querySelector("svg");
}
