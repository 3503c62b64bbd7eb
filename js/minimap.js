// An overview of big graphs: the whole layout drawn small, the visible part framed; a
// click there centres the view on that point. Optional: its × hides it and the search
// bar's "overview" button brings it back (remembered per browser).
//
// It is drawn on a canvas from the shapes Graphviz wrote (outlines, module frames, edges
// and arrowheads: their points, fills and strokes; no text, unreadable at this size).
// The SVG itself shown as an image was decoded, styled and laid out again on the main
// thread: ~1.3 s at 3,000 nodes, a freeze right after the graph appeared.
import { graphElements } from "./cull.js";
import { h } from "./dom.js";
import { GRAPHVIZ_PATH, NUMBER, TRANSLATE } from "./view.js";

// Draw `svg`'s shapes (Graphviz's own coordinates, moved by its graph group's translation)
// on `context`, already scaled to the viewBox's units; those of a big graph's tiles still
// out of the page too (`culler`: js/cull.js's, or null). Returns how many were drawn.
export function drawShapes(context, svg, culler = null) {
  const graph = svg.querySelector("g.graph");
  if (!graph) return 0;
  const move = TRANSLATE.exec(graph.getAttribute("transform") ?? "");
  if (move) context.translate(Number(move[1]), Number(move[2]));
  let drawn = 0;
  for (const el of graphElements(graph, "polygon, polyline, ellipse, path", culler)) {
    if (el.closest(".fxviz-marker") || !trace(context, el)) continue;
    const fill = el.getAttribute("fill");
    const stroke = el.getAttribute("stroke") ?? "black";
    if (paints(fill) && el.tagName.toLowerCase() !== "polyline") {
      context.globalAlpha = opacity(el, "fill-opacity");
      context.fillStyle = fill;
      context.fill();
    }
    if (paints(stroke)) {
      context.globalAlpha = opacity(el, "stroke-opacity");
      context.strokeStyle = stroke;
      context.lineWidth = Number(el.getAttribute("stroke-width")) || 1;
      context.stroke();
    }
    drawn++;
  }
  return drawn;
}

// A colour a canvas paints as the SVG would (not none, transparent or a gradient's url).
const paints = (colour) => Boolean(colour) && colour !== "none" && colour !== "transparent" && !colour.startsWith("url(");
const opacity = (el, name) => {
  const value = Number(el.getAttribute(name) ?? 1);
  return Number.isFinite(value) ? Math.min(Math.max(value, 0), 1) : 1;
};

// The shape as the context's current path; false for one whose attributes it cannot
// read (a path with commands other than Graphviz's M and C).
function trace(context, el) {
  const tag = el.tagName.toLowerCase();
  context.beginPath();
  if (tag === "ellipse") {
    const [cx, cy, rx, ry] = ["cx", "cy", "rx", "ry"].map((name) => Number(el.getAttribute(name)));
    if (![cx, cy, rx, ry].every(Number.isFinite)) return false;
    context.ellipse(cx, cy, Math.abs(rx), Math.abs(ry), 0, 0, 2 * Math.PI);
    return true;
  }
  if (tag === "path") {
    const d = el.getAttribute("d") ?? "";
    if (!GRAPHVIZ_PATH.test(d)) return false;
    for (const command of d.match(/[MC][^MC]*/g) ?? []) {
      const n = command.match(NUMBER)?.map(Number) ?? [];
      if (command[0] === "M" && n.length >= 2) context.moveTo(n[0], n[1]);
      else for (let i = 0; i + 5 < n.length; i += 6) context.bezierCurveTo(n[i], n[i + 1], n[i + 2], n[i + 3], n[i + 4], n[i + 5]);
    }
    return true;
  }
  const n = (el.getAttribute("points") ?? "").match(NUMBER)?.map(Number) ?? [];
  if (n.length < 4) return false;
  context.moveTo(n[0], n[1]);
  for (let i = 2; i + 1 < n.length; i += 2) context.lineTo(n[i], n[i + 1]);
  if (tag === "polygon") context.closePath();
  return true;
}

const HIDDEN_KEY = "fxviz.minimap.hidden";

function hiddenByChoice() {
  try { return globalThis.localStorage?.getItem(HIDDEN_KEY) === "1"; } catch { return false; }
}
function rememberHidden(hidden) {
  try { globalThis.localStorage?.setItem(HIDDEN_KEY, hidden ? "1" : "0"); } catch { /* storage refused */ }
}

export function overview(container, getPanZoom) {
  const box = h("div", { class: "fxviz-minimap", title: "overview: click to move there" });
  const image = h("canvas", { "aria-hidden": "true" });
  const frame = h("div", { class: "fxviz-minimap-frame" });
  const close = h("button", { class: "fxviz-minimap-close", title: "hide the overview", "aria-label": "hide the overview" }, "×");
  const toggle = h("button", { class: "fxviz-btn fxviz-minimap-toggle", title: "show the overview of the whole graph" }, "overview");
  toggle.style.display = "none";
  box.append(image, frame, close);
  let source = null; // the SVG shown small, drawn once it has a place
  let drawn = false;
  const place = () => {
    const hidden = hiddenByChoice();
    if (source && !hidden) container.append(box);
    else box.remove();
    toggle.style.display = source && hidden ? "" : "none";
    if (source && !hidden && !drawn) draw();
  };
  // the whole viewBox in the box, centred ("contain"), as geometry() reads it back
  const draw = () => {
    const pz = getPanZoom();
    const width = box.clientWidth, height = box.clientHeight;
    if (!pz || !width || !height) return;
    const ratio = globalThis.devicePixelRatio || 1;
    image.width = Math.round(width * ratio);
    image.height = Math.round(height * ratio);
    const context = image.getContext("2d");
    const { s, scale, left, top } = layoutOf(pz, width, height);
    context.setTransform(ratio * scale, 0, 0, ratio * scale, ratio * (left - s.viewBox.x * scale), ratio * (top - s.viewBox.y * scale));
    drawShapes(context, source.svg, source.culler);
    drawn = true;
    this_.update();
  };
  const layoutOf = (pz, width, height) => {
    const s = pz.getSizes();
    const scale = Math.min(width / s.viewBox.width, height / s.viewBox.height);
    return { s, scale, left: (width - s.viewBox.width * scale) / 2, top: (height - s.viewBox.height * scale) / 2 };
  };
  close.addEventListener("click", (event) => { event.stopPropagation(); rememberHidden(true); place(); });
  toggle.addEventListener("click", () => { rememberHidden(false); place(); this_.update(); });
  const geometry = () => {
    const pz = getPanZoom();
    if (!pz || !drawn) return null;
    return { pz, ...layoutOf(pz, box.clientWidth, box.clientHeight) };
  };
  box.addEventListener("click", (event) => {
    const g = geometry();
    if (!g) return;
    const rect = box.getBoundingClientRect();
    const x = (event.clientX - rect.left - g.left) / g.scale;
    const y = (event.clientY - rect.top - g.top) / g.scale;
    g.pz.pan({ x: g.s.width / 2 - x * g.s.realZoom, y: g.s.height / 2 - y * g.s.realZoom });
  });
  const this_ = {
    toggle, // for the search bar
    // `svg`: the graph's SVG on the page (read, never changed), or null: no overview;
    // `culler`: its tiles (js/cull.js), some of which may be out of the page
    show(svg, culler = null) {
      source = svg && { svg, culler };
      drawn = false;
      place();
    },
    update() {
      const g = geometry();
      if (!g) return;
      const pan = g.pz.getPan();
      Object.assign(frame.style, {
        left: `${g.left + (-pan.x / g.s.realZoom) * g.scale}px`,
        top: `${g.top + (-pan.y / g.s.realZoom) * g.scale}px`,
        width: `${(g.s.width / g.s.realZoom) * g.scale}px`,
        height: `${(g.s.height / g.s.realZoom) * g.scale}px`,
      });
    },
  };
  return this_;
}
