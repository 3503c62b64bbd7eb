// Unit tests of where Graphviz's SVG text is cut into slices (js/parse.js): `npm test`.
import assert from "node:assert/strict";
import test from "node:test";
import { itemBounds, slices } from "../parse.js";

const item = (kind, i, body = "x".repeat(40)) => `<g id="${kind}${i}" class="${kind === "clust" ? "cluster" : kind}">\n<title>${body}</title>\n</g>\n`;
const head = '<svg viewBox="0 0 10 10">\n<g id="graph0" class="graph" transform="translate(4 4)">\n<title>G</title>\n<g id="a_graph0"><a><polygon points="0,0 1,1"/></a>\n</g>\n';
const tail = "</g>\n</svg>\n";

test("the graph's elements are found where Graphviz starts them, not at their anchors", () => {
  const body = item("clust", 1) + item("node", 1) + '<g id="a_node1"><a xlink:title="t">\n</a>\n</g>\n' + item("edge", 1);
  const text = head + body + tail;
  const bounds = itemBounds(text);
  assert.equal(bounds.starts.length, 3);
  for (const start of bounds.starts) assert.match(text.slice(start), /^<g id="(clust|node|edge)1"/);
  assert.equal(text.slice(bounds.close), tail);
});

test("slices cover every element once, each cut at an element's start", () => {
  const text = head + Array.from({ length: 50 }, (_, i) => item("node", i)).join("") + tail;
  const bounds = itemBounds(text);
  const cuts = slices(bounds, 300);
  assert.ok(cuts.length > 5);
  assert.equal(cuts[0][0], bounds.starts[0]);
  assert.equal(cuts.at(-1)[1], bounds.close);
  cuts.slice(1).forEach(([from], i) => {
    assert.equal(from, cuts[i][1]); // no gap, no overlap
    assert.ok(bounds.starts.includes(from));
  });
  assert.equal(cuts.map(([a, b]) => text.slice(a, b)).join(""), text.slice(bounds.starts[0], bounds.close));
});

test("a text without the graph's elements is not cut", () => {
  assert.equal(itemBounds(head + tail), null);
  assert.equal(itemBounds("<div>no svg</div>"), null);
});
