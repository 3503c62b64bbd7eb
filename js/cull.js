// Off-screen parts of a big graph are not painted. Chromium repaints the whole SVG on
// every visible change (a step restyling two nodes of 3,000 re-walks ~40,000 elements:
// ~35 ms of main thread a step); a `display: none` subtree is skipped. The graph's
// elements are gathered, in document order (so paint order is unchanged), into tiles of
// TILE_SIZE; after each pan or zoom only the tiles near the panel are displayed.
// Anything that measures a node (nodeBox) reveals its tile first: `reveal`.
// The tiles are made before the SVG is put in, their boxes read off what Graphviz wrote,
// and every tile stays out of the page (a comment holds its place) until a view comes
// near it: an element in the page costs its share when the page styles the SVG even in a
// `display: none` tile (~450 ms for the 40,000 of a 3,000-node graph, ~4 ms with them out).
// Once the graph is painted, the tiles still out are put in, hidden, a few a frame
// (`putInRest`): the page then holds every element again, as queries of it expect.

export const CULL_FROM = 1500; // top-level elements (nodes, edges, frames) before culling pays
export const TILE_SIZE = 100; // elements a tile
const SVG_NS = "http://www.w3.org/2000/svg";
const TILE = "fxviz-tile";

// Which tiles are near a view: `view` and each box are {x, y, width, height} in the same
// coordinates; `margin` (a fraction of the view) is kept around it so that small pans
// change nothing; a null box (not known) is always near. Returns the indices of the
// tiles to show.
export function tilesNear(boxes, view, margin = 1) {
  const mx = view.width * margin;
  const my = view.height * margin;
  const left = view.x - mx, right = view.x + view.width + mx;
  const top = view.y - my, bottom = view.y + view.height + my;
  const shown = [];
  boxes.forEach((b, i) => {
    if (!b || (b.x <= right && b.x + b.width >= left && b.y <= bottom && b.y + b.height >= top)) shown.push(i);
  });
  return shown;
}

// Wrap the graph's elements into tiles when there are enough to matter; returns a culler,
// or null:
// - `update(view)` shows the tiles near `view` (in the coordinates `measure(tile)` gives
//   boxes in) and hides the others;
// - `all`: the tiles, in order;
// - `putInRest(count)` puts up to `count` of the tiles still out of the page in, hidden,
//   and says how many are left out.
// `measure` must not lay the SVG out (it runs before any view): a tile it gives null for
// is always shown. Every other tile is out of the page till `update` or `putInRest`.
export function tileGraph(svg, measure) {
  const graph = svg.querySelector("g.graph");
  if (!graph) return null;
  const items = [...graph.children].filter((c) => c.tagName === "g");
  if (items.length < CULL_FROM) return null;
  const tiles = [];
  for (let i = 0; i < items.length; i += TILE_SIZE) {
    const tile = document.createElementNS(SVG_NS, "g");
    tile.setAttribute("class", TILE);
    items[i].before(tile);
    tile.append(...items.slice(i, i + TILE_SIZE));
    tiles.push(tile);
  }
  const boxes = tiles.map(measure);
  tiles.forEach((tile, i) => {
    if (!boxes[i]) return;
    tile.style.display = "none";
    takeOut(tile);
  });
  return {
    tiles: tiles.length,
    all: tiles,
    update(view) {
      const near = new Set(tilesNear(boxes, view));
      tiles.forEach((tile, i) => {
        const display = near.has(i) ? "" : "none";
        if (display === "") putIn(tile);
        if (tile.style.display !== display) tile.style.display = display; // only what changes
      });
    },
    putInRest(count) {
      const rest = tiles.filter((tile) => places.has(tile)); // still out of the page
      rest.slice(0, count).forEach(putIn);
      return Math.max(0, rest.length - count);
    },
  };
}

const places = new WeakMap(); // a tile out of the page -> the comment holding its place

function takeOut(tile) {
  const place = document.createComment("");
  tile.replaceWith(place);
  places.set(tile, place);
}

function putIn(tile) {
  const place = places.get(tile);
  if (!place) return;
  place.replaceWith(tile);
  places.delete(tile);
}

// Where a tile out of the page sits in it (the comment in its place), else null: what
// lies above it there is what would lie above it in the page.
export function placeOf(tile) {
  return places.get(tile) ?? null;
}

// A hidden tile has no geometry: show the one holding `element` (putting it in the page)
// before measuring it (the next update hides it again if it is still far away).
export function reveal(element) {
  const tile = element.closest?.(`g.${TILE}`);
  if (!tile) return;
  putIn(tile);
  if (tile.style.display === "none") tile.style.display = "";
}

// Every element of the graph `svg` that `selector` matches, those of tiles out of the page
// too (`culler`: tileGraph's, or null), in the order of the SVG Graphviz wrote.
export function graphElements(svg, selector, culler) {
  const found = [...svg.querySelectorAll(selector)];
  if (!culler) return found;
  const untiled = found.filter((el) => !el.closest(`g.${TILE}`));
  for (const tile of culler.all) untiled.push(...tile.querySelectorAll(selector));
  return untiled;
}
