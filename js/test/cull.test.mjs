// Unit tests of which tiles of a big graph are painted (js/cull.js): `npm test`.
import assert from "node:assert/strict";
import test from "node:test";
import { tilesNear } from "../cull.js";

const box = (x, y, width = 10, height = 10) => ({ x, y, width, height });

test("tiles in the view and within a view's size of it are painted, the others not", () => {
  const boxes = [box(0, 0), box(0, 150), box(0, 250), box(0, 1000), box(500, 0)];
  const view = { x: 0, y: 100, width: 100, height: 100 };
  assert.deepEqual(tilesNear(boxes, view), [0, 1, 2]); // 0..300 tall, -100..200 wide
  assert.deepEqual(tilesNear(boxes, view, 0), [1]); // no margin: only what is in view
});

test("a tile crossing the view is painted even when its corners lie outside", () => {
  const tall = box(40, -1000, 10, 5000); // a long edge passing through
  assert.deepEqual(tilesNear([tall], { x: 0, y: 0, width: 100, height: 100 }, 0), [0]);
});

test("a tile whose box is not known is always painted", () => {
  const boxes = [box(0, 0), null, box(0, 5000)];
  assert.deepEqual(tilesNear(boxes, { x: 0, y: 0, width: 100, height: 100 }, 0), [0, 1]);
});
