// An overview of big graphs: the whole layout as a small image, the visible part framed;
// a click there centres the view on that point. Optional: its × hides it and the search
// bar's "overview" button brings it back (remembered per browser).
import { h } from "./dom.js";

const HIDDEN_KEY = "fxviz.minimap.hidden";

function hiddenByChoice() {
  try { return globalThis.localStorage?.getItem(HIDDEN_KEY) === "1"; } catch { return false; }
}
function rememberHidden(hidden) {
  try { globalThis.localStorage?.setItem(HIDDEN_KEY, hidden ? "1" : "0"); } catch { /* storage refused */ }
}

export function overview(container, getPanZoom) {
  const box = h("div", { class: "fxviz-minimap", title: "overview: click to move there" });
  const image = h("img", { alt: "" });
  const frame = h("div", { class: "fxviz-minimap-frame" });
  const close = h("button", { class: "fxviz-minimap-close", title: "hide the overview", "aria-label": "hide the overview" }, "×");
  const toggle = h("button", { class: "fxviz-btn fxviz-minimap-toggle", title: "show the overview of the whole graph" }, "overview");
  toggle.style.display = "none";
  box.append(image, frame, close);
  let url = null;
  const place = () => {
    const hidden = hiddenByChoice();
    if (url && !hidden) container.append(box);
    else box.remove();
    toggle.style.display = url && hidden ? "" : "none";
  };
  close.addEventListener("click", (event) => { event.stopPropagation(); rememberHidden(true); place(); });
  toggle.addEventListener("click", () => { rememberHidden(false); place(); this_.update(); });
  const geometry = () => {
    const pz = getPanZoom();
    if (!pz || !image.naturalWidth) return null;
    const s = pz.getSizes();
    const scale = Math.min(box.clientWidth / s.viewBox.width, box.clientHeight / s.viewBox.height);
    const left = (box.clientWidth - s.viewBox.width * scale) / 2;
    const top = (box.clientHeight - s.viewBox.height * scale) / 2;
    return { pz, s, scale, left, top };
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
    show(svgText) {
      if (url) URL.revokeObjectURL(url);
      url = null;
      if (svgText) {
        url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
        image.onload = () => this_.update();
        image.src = url;
      }
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
