// Bundles the front end into fxviz/static/: the layout worker (WebAssembly Graphviz) is
// built first and inlined into the widget module as text, so one file works offline.
import * as esbuild from "esbuild";
import { copyFile, mkdir } from "node:fs/promises";

const watch = process.argv.includes("--watch");
const out = "fxviz/static";
await mkdir(out, { recursive: true });

async function buildOnce() {
  const worker = await esbuild.build({
    entryPoints: ["js/layout-worker.js"],
    bundle: true,
    format: "iife",
    minify: true,
    write: false,
    target: "es2020",
  });
  const define = { FXVIZ_WORKER_SOURCE: JSON.stringify(worker.outputFiles[0].text) };
  const bundle = (entry, format) =>
    esbuild.build({ entryPoints: [`js/${entry}.js`], bundle: true, format, minify: !watch, outfile: `${out}/${entry}.js`, target: "es2020", define });
  await bundle("widget", "esm"); // the anywidget module
  await bundle("report", "iife"); // inlined into HTML reports
  await copyFile("js/widget.css", `${out}/widget.css`);
  console.log(`fxviz front end built into ${out}/`);
}

await buildOnce();
if (watch) {
  const { watch: watchFiles } = await import("node:fs");
  watchFiles("js", { recursive: true }, () => buildOnce().catch((e) => console.error(e)));
}
