// Opening the module boxes in view before anyone points at them. A click on a box no one
// rested on or pressed would wait for the kernel (~50 ms through a stock Jupyter server)
// and for Graphviz; so once a view is painted and the page is idle, or the view has stood
// still AHEAD_REST_MS after a pan or zoom, the page peeks at the boxes wholly inside the
// panel (js/peek.js: the kernel answers with that opening's DOT, proportional to what it
// shows, and the worker lays it out), nearest the panel's centre first, AHEAD_BOXES at
// most each time the view rests. The kernel is shared with the person's cells: the few
// asks go together (one wait for the kernel's answers, ~5-20 ms of its time at 50,000 to
// 100,000 nodes); the worker with every draw: their layouts wait until it has nothing else
// to do, one at a time (js/layout.js). A press, a wheel turn or a key in the widget puts
// asking off until the view rests again; a peek not answered within AHEAD_WAIT_MS (a
// kernel busy with a cell, or none: a notebook saved with its widgets) stops it for that
// view. An HTML report answers peeks itself, from the drawings it holds (js/report.js).

export const AHEAD_BOXES = 3; // boxes opened ahead each time the view rests
export const AHEAD_REST_MS = 250; // still this long after a pan or zoom: the view rests
export const AHEAD_WAIT_MS = 5000; // an answer later than this: none is coming
// An opening's DOT longer than this (~500 nodes drawn; a 100,000-node graph's collapsed
// view with one module open is ~60,000) is kept but not laid out ahead: it would hold the
// worker from the person's own draws too long. A click on its box lays it out then.
export const AHEAD_LAYOUT_CHARS = 150_000;

// The boxes to open ahead, nearest the panel's centre first: those of `boxes` ([{ g, box }],
// box in panel px) wholly inside the panel (`width` x `height` px).
export function aheadOrder(boxes, { width, height }) {
  const inside = boxes.filter(({ box: b }) => b && b.x >= 0 && b.y >= 0 && b.x + b.width <= width && b.y + b.height <= height);
  const away = ({ box: b }) => Math.hypot(b.x + b.width / 2 - width / 2, b.y + b.height / 2 - height / 2);
  return inside.map((item) => [away(item), item]).sort((a, b) => a[0] - b[0]).map(([, item]) => item);
}

// Open ahead the boxes of the view shown in `root`; `peek(g, options)` peeks at box `g`
// (a promise settled once done, null when nothing was asked: js/peek.js); `inView()` gives the
// view's SVG, its boxes drawn ([{ g, box }], panel px) and the panel's size. Returns
// { painted(), rest(), stop() }: a view was painted (asks once idle), the view moved (asks
// once it rests), the widget goes away (asks made already finish).
export function openAhead(root, peek, inView) {
  let round = 0; // the current round of asks: any newer one (or a stop) ends it
  let timer = null;
  let silent = null; // the view for which a peek went unanswered
  const stop = () => { round += 1; clearTimeout(timer); };
  const rest = () => {
    stop();
    const mine = round;
    timer = setTimeout(() => idle(() => { if (mine === round) ask(); }), AHEAD_REST_MS);
  };
  for (const type of ["pointerdown", "wheel", "keydown"]) root.addEventListener(type, rest, { capture: true, passive: true });
  let asking = false; // the kernel has not answered every ask of the last round yet
  let again = false; // the view rested again meanwhile: asked once those are answered
  async function ask() {
    if (asking) { again = true; return; } // never more than AHEAD_BOXES asks waiting
    const { svg, boxes, panel } = inView();
    if (!svg || svg === silent) return;
    const asks = [];
    for (const { g } of aheadOrder(boxes, panel)) {
      if (asks.length >= AHEAD_BOXES) break;
      const done = peek(g, { layoutUpTo: AHEAD_LAYOUT_CHARS, background: true }); // null: peeked already
      if (done) asks.push(done);
    }
    if (!asks.length) return;
    let timeout;
    const late = new Promise((resolve) => { timeout = setTimeout(() => resolve("late"), AHEAD_WAIT_MS); });
    asking = true;
    if ((await Promise.race([Promise.all(asks), late])) === "late") silent = svg;
    clearTimeout(timeout);
    asking = false;
    if (again) { again = false; rest(); }
  }
  return {
    rest,
    // once the painted frame's own tasks have run: a new view asks at once when idle
    painted() {
      stop();
      const mine = round;
      requestAnimationFrame(() => setTimeout(() => idle(() => { if (mine === round) ask(); }), 0));
    },
    stop,
  };
}

function idle(then) {
  if (globalThis.requestIdleCallback) requestIdleCallback(then, { timeout: 200 });
  else setTimeout(then, 0);
}
