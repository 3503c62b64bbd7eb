// Off-screen parts of a big graph are not painted. Chromium repaints the whole SVG on
// every visible change (a step restyling two nodes of 3,000 re-walks ~40,000 elements:
// ~35 ms of main thread a step); a `display: none` subtree is skipped. The graph's
// elements are gathered, in document order (so paint order is unchanged), into tiles of
// TILE_SIZE; after each pan or zoom only the tiles near the panel are displayed.
// Anything that measures a node (nodeBox) reveals its tile first: `reveal`.
// The tiles are made as the SVG is put in, and hidden until the view is set: their boxes
// are read off what Graphviz wrote, so the page first styles and lays out only the tiles
// near the opening view (a 3,000-node graph laid out whole held the main thread ~1 s).

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

// Wrap the graph's elements into tiles when there are enough to matter; returns a culler
// (`update(view)`: show the tiles near `view`, in the coordinates `measure(tile)` gives
// boxes in), or null. `measure` must not lay the SVG out (it runs before any view): a
// tile it gives null for is always shown. Every other tile is hidden till `update`.
export function tileGraph(svg, measure) {
  const graph = svg.querySelector("g.graph");
  if (!graph) return null;
  const items = [...graph.children].filter((c) => c.tagName === "g");
  if (items.length < CULL_FROM) return null;
  const tiles = [];
  for (let i = 0; i < items.length; i += TILE_SIZE) {
    const tile = document.createElementNS(SVG_NS, "g");
    tile.setAttribute("class", TILE);
    tile.style.display = "none";
    items[i].before(tile);
    tile.append(...items.slice(i, i + TILE_SIZE));
    tiles.push(tile);
  }
  const boxes = tiles.map(measure);
  boxes.forEach((b, i) => { if (!b) tiles[i].style.display = ""; });
  return {
    tiles: tiles.length,
    update(view) {
      const near = new Set(tilesNear(boxes, view));
      tiles.forEach((tile, i) => {
        const display = near.has(i) ? "" : "none";
        if (tile.style.display !== display) tile.style.display = display; // only what changes
      });
    },
  };
}

// A hidden tile has no geometry: show the one holding `element` before measuring it (the
// next update hides it again if it is still far away).
export function reveal(element) {
  const tile = element.closest?.(`g.${TILE}`);
  if (tile && tile.style.display === "none") tile.style.display = "";
}
