// The inspector: the selected node's fields, histogram, preview and error.
import { h } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";

export function renderInspector(box, info) {
  box.replaceChildren();
  if (!info || !info.name) {
    box.append(h("div", { class: "fxviz-hint" }, "click a node to inspect it"));
    return;
  }
  box.append(h("div", { class: "fxviz-title" }, ...breakable(info.name)));
  const dl = h("dl");
  for (const [key, value] of info.fields || []) dl.append(h("dt", {}, ...breakable(key)), h("dd", {}, ...breakable(String(value))));
  box.append(dl);
  if (info.histogram?.counts?.length) box.append(histogram(info.histogram));
  if (info.preview) box.append(h("pre", { class: "fxviz-preview" }, info.preview));
  if (info.error) box.append(h("pre", { class: "fxviz-node-error" }, info.error));
}

// `text` as text and <wbr> after each "_", "." and "/": a narrow panel wraps a long
// identifier ("transformer_h_2_ln_1_weight", "torch.nn.functional.layer_norm") between its
// words, never inside one, nor inside a number ("0.9958").
const BREAKS = /(?<=[_/])(?=[^_./\s])|(?<=\.)(?=[^_./\s\d])|(?<=\D\.)(?=\d)/;
export function breakable(text) {
  return text.split(BREAKS).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
}

function histogram({ counts, low, high }) {
  const width = 220, height = 48, top = Math.max(...counts, 1), bar = width / counts.length;
  const chart = document.createElementNS(NS, "svg");
  chart.setAttribute("class", "fxviz-histogram");
  chart.setAttribute("viewBox", `0 0 ${width} ${height + 12}`);
  counts.forEach((count, i) => {
    const r = document.createElementNS(NS, "rect");
    const barHeight = (count / top) * height;
    r.setAttribute("x", i * bar);
    r.setAttribute("y", height - barHeight);
    r.setAttribute("width", Math.max(bar - 1, 1));
    r.setAttribute("height", barHeight);
    chart.append(r);
  });
  for (const [x, text, anchor] of [[0, low, "start"], [width, high, "end"]]) {
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", x);
    t.setAttribute("y", height + 11);
    t.setAttribute("text-anchor", anchor);
    t.textContent = Number(text).toPrecision(3);
    chart.append(t);
  }
  return chart;
}
