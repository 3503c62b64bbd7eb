// An overview of big graphs: the whole layout as a small image, the visible part framed;
// a click there centres the view on that point.
import { h } from "./dom.js";

export function overview(container, getPanZoom) {
  const box = h("div", { class: "fxviz-minimap", title: "overview: click to move there" });
  const image = h("img", { alt: "" });
  const frame = h("div", { class: "fxviz-minimap-frame" });
  box.append(image, frame);
  let url = null;
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
  return {
    show(svgText) {
      if (url) URL.revokeObjectURL(url);
      url = null;
      box.remove();
      if (!svgText) return;
      url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
      image.onload = () => this.update();
      image.src = url;
      container.append(box);
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
}
