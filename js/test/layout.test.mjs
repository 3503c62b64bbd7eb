// Unit tests of the layout queue (js/layout.js): what the worker is given, and when.
// `npm test` (node --test). The worker is a stand-in that answers when told to: what is
// tested is the order the page hands layouts over in, not Graphviz.
import assert from "node:assert/strict";
import test from "node:test";

class StandInWorker {
  constructor() { StandInWorker.last = this; this.posted = []; }
  postMessage(message) { this.posted.push(message); }
  answer(dot) { // the worker finishes the layout of `dot`
    const { id } = this.posted.find((m) => m.dot === dot);
    this.onmessage({ data: { id, svg: `<svg>${dot}</svg>` } });
  }
  terminate() {}
}
globalThis.Worker = StandInWorker;
globalThis.FXVIZ_WORKER_SOURCE = "";
const { holdBackground, layout } = await import("../layout.js");
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

test("layouts made ahead wait for the worker to be free: a draw waits for one at most", async () => {
  const ahead1 = layout("ahead 1", { background: true }); // the worker is free: it goes
  const ahead2 = layout("ahead 2", { background: true });
  const ahead3 = layout("ahead 3", { background: true });
  const drawn = layout("drawn"); // a view to draw: straight to the worker
  const worker = StandInWorker.last;
  assert.deepEqual(worker.posted.map((m) => m.dot), ["ahead 1", "drawn"]);
  assert.equal(layout("ahead 3"), ahead3); // its box clicked: one layout, given over now
  assert.deepEqual(worker.posted.map((m) => m.dot), ["ahead 1", "drawn", "ahead 3"]);
  worker.answer("ahead 1");
  worker.answer("drawn");
  assert.equal(await drawn, "<svg>drawn</svg>");
  await tick();
  assert.equal(worker.posted.length, 3); // "ahead 3" still in the worker: "ahead 2" waits
  worker.answer("ahead 3");
  await Promise.all([ahead1, ahead3]);
  await tick();
  assert.deepEqual(worker.posted.map((m) => m.dot), ["ahead 1", "drawn", "ahead 3", "ahead 2"]);
  worker.answer("ahead 2");
  assert.equal(await ahead2, "<svg>ahead 2</svg>");
  assert.equal(await layout("ahead 2", { background: true }), "<svg>ahead 2</svg>"); // kept
  assert.equal(worker.posted.length, 4);
});

test("while a view is drawn, no layout made ahead is given to the worker", async () => {
  const release = holdBackground(); // a view being drawn
  const ahead = layout("ahead 4", { background: true });
  const worker = StandInWorker.last;
  const before = worker.posted.length;
  const drawn = layout("drawn 2");
  assert.deepEqual(worker.posted.slice(before).map((m) => m.dot), ["drawn 2"]);
  worker.answer("drawn 2");
  await drawn;
  await tick();
  assert.equal(worker.posted.length, before + 1); // the worker is free, the draw not painted
  release();
  release(); // once only
  assert.deepEqual(worker.posted.slice(before).map((m) => m.dot), ["drawn 2", "ahead 4"]);
  worker.answer("ahead 4");
  await ahead;
});
