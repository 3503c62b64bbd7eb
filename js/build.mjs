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
  await esbuild.build({
    entryPoints: ["js/widget.js"],
    bundle: true,
    format: "esm",
    minify: !watch,
    outfile: `${out}/widget.js`,
    target: "es2020",
    define: { FXVIZ_WORKER_SOURCE: JSON.stringify(worker.outputFiles[0].text) },
  });
  await esbuild.build({
    entryPoints: ["js/report.js"],
    bundle: true,
    format: "iife",
    minify: !watch,
    outfile: `${out}/report.js`,
    target: "es2020",
    define: { FXVIZ_WORKER_SOURCE: JSON.stringify(worker.outputFiles[0].text) },
  });
  await copyFile("js/widget.css", `${out}/widget.css`);
  console.log(`fxviz front end built into ${out}/`);
}

await buildOnce();
if (watch) {
  const { watch: watchFiles } = await import("node:fs");
  watchFiles("js", { recursive: true }, () => buildOnce().catch((e) => console.error(e)));
}
