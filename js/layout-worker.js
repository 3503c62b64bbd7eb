// Lays DOT out as SVG with WebAssembly Graphviz. Runs as a Web Worker; where workers are
// not allowed the same code runs on the main thread through globalThis.__fxvizLayoutMain.
import { Graphviz } from "@hpcc-js/wasm-graphviz";

let loading = null;

async function layoutSvg(dot) {
  loading ??= Graphviz.load();
  const graphviz = await loading;
  return graphviz.layout(dot, "svg", "dot");
}

if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  self.onmessage = async (event) => {
    const { id, dot } = event.data;
    try {
      postMessage({ id, svg: await layoutSvg(dot) });
    } catch (error) {
      postMessage({ id, error: String(error?.message ?? error) });
    }
  };
} else {
  globalThis.__fxvizLayoutMain = layoutSvg;
}
