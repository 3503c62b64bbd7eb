// Unit tests of which module boxes are opened ahead (js/ahead.js): `npm test` (node --test).
import assert from "node:assert/strict";
import test from "node:test";
import { aheadOrder } from "../ahead.js";

const box = (g, x, y, width = 100, height = 40) => ({ g, box: { x, y, width, height } });

test("the boxes wholly inside the panel are opened ahead, nearest its centre first", () => {
  const panel = { width: 800, height: 600 };
  const boxes = [
    box("top", 350, 10), // centre (400, 30): 270 px from the panel's centre (400, 300)
    box("middle", 360, 290), // 10 px away
    box("left", 20, 280), // 330 px away
    box("below", 350, 420), // 140 px away
    box("cut", 750, 280), // runs off the right side: not in view
    box("above", 350, -30), // runs off the top
    { g: "unread", box: null }, // no box read off it
  ];
  assert.deepEqual(aheadOrder(boxes, panel).map(({ g }) => g), ["middle", "below", "top", "left"]);
  assert.deepEqual(aheadOrder([], panel), []);
  assert.deepEqual(aheadOrder(boxes, { width: 0, height: 0 }), []); // a panel not laid out yet
});
