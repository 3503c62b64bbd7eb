// One layout worker shared by every fxviz widget on the page (anywidget loads this module
// once per widget, so the singleton lives on globalThis under a versioned key). A layout
// that runs past its time limit terminates the worker: WebAssembly cannot be interrupted.
// Where a page forbids workers (a Content-Security-Policy `worker-src 'none'`, as some
// VS Code webviews have), the worker fails before answering anything: every layout then
// runs on the main thread instead.
// Layouts are kept by their DOT (js/layout-cache.js): a view seen before comes back at once.
/* global FXVIZ_WORKER_SOURCE */
import { createLayoutCache } from "./layout-cache.js";

const KEY = "__fxviz_layout_v3";

function shared() {
  globalThis[KEY] ??= { worker: null, url: null, nextId: 1, pending: new Map(), noWorker: false, answered: false, cache: createLayoutCache() };
  return globalThis[KEY];
}

function startWorker(state) {
  state.url ??= URL.createObjectURL(new Blob([FXVIZ_WORKER_SOURCE], { type: "text/javascript" }));
  const worker = new Worker(state.url);
  worker.onmessage = (event) => {
    state.answered = true;
    const { id, svg, error } = event.data;
    const job = state.pending.get(id);
    if (!job) return;
    state.pending.delete(id);
    clearTimeout(job.timer);
    error ? job.reject(new Error(error)) : job.resolve(svg);
  };
  worker.onerror = (event) => {
    worker.terminate();
    state.worker = null;
    const jobs = [...state.pending.values()];
    state.pending.clear();
    if (!state.answered) { // it never worked here: the page forbids workers
      state.noWorker = true;
      for (const job of jobs) { clearTimeout(job.timer); onMainThread(job.dot).then(job.resolve, job.reject); }
      return;
    }
    for (const job of jobs) job.reject(new Error(event.message || "layout worker failed"));
  };
  return worker;
}

async function onMainThread(dot) {
  if (!globalThis.__fxvizLayoutMain) new Function(FXVIZ_WORKER_SOURCE)();
  return globalThis.__fxvizLayoutMain(dot);
}

// A Content-Security-Policy that forbids workers reports it here too (some browsers
// throw from `new Worker`, others only report the violation and fire `error`).
globalThis.document?.addEventListener?.("securitypolicyviolation", (event) => {
  if (/^(worker|child|script)-src/.test(event.effectiveDirective ?? "") && String(event.blockedURI).startsWith("blob")) shared().noWorker = true;
});

// A DOT already being laid out (peeked at, then sent by the kernel) is laid out once.
// `background: true` (a box opened ahead, js/ahead.js): the layout waits until the worker
// has nothing else to do, so a draw waits for one such layout at most, never a queue of
// them; asked for again without it meanwhile, it goes at once. Where there is no worker
// it is not made (it would hold the page): it fails.
export function layout(dot, options = {}) {
  const state = shared();
  const kept = state.cache.get(dot);
  if (kept !== undefined) return Promise.resolve(kept);
  state.running ??= new Map(); // dot -> its layout's promise, while the worker makes it
  state.waiting ??= []; // background layouts not given to the worker yet: [{ dot, go }]
  const running = state.running.get(dot);
  if (running) {
    if (!options.background) hurry(state, dot);
    return running;
  }
  let job;
  if (options.background) {
    if (state.noWorker) return Promise.reject(new Error("no layout worker: not laid out ahead"));
    job = new Promise((resolve, reject) => {
      state.waiting.push({ dot, go: () => layoutNew(state, dot, options).then(resolve, reject) });
    });
  } else {
    job = layoutNew(state, dot, options);
  }
  job = job
    .then((svg) => { state.cache.put(dot, svg); return svg; })
    .finally(() => { state.running.delete(dot); nextInBackground(state); });
  state.running.set(dot, job);
  nextInBackground(state);
  return job;
}

// While a view is drawn (from its layout to the frame that paints it), no layout made
// ahead is given to the worker: it would compete with the draw for the CPU. Returns the
// function that ends the hold (once, whatever the number of calls).
export function holdBackground() {
  const state = shared();
  state.held = (state.held ?? 0) + 1;
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    state.held -= 1;
    nextInBackground(state);
  };
}

// The oldest background layout to the worker, when it has nothing else to do.
function nextInBackground(state) {
  if (state.pending.size || state.held || !state.waiting?.length) return;
  state.waiting.shift().go();
}

// A background layout not given to the worker yet, wanted now.
function hurry(state, dot) {
  const i = state.waiting.findIndex((job) => job.dot === dot);
  if (i >= 0) state.waiting.splice(i, 1)[0].go();
}

function layoutNew(state, dot, { timeoutMs = 30000 } = {}) {
  if (!state.noWorker && !state.worker) {
    try {
      state.worker = startWorker(state);
    } catch {
      state.noWorker = true; // a browser that throws at once
    }
  }
  if (state.noWorker) return onMainThread(dot);
  return new Promise((resolve, reject) => {
    const id = state.nextId++;
    const timer = setTimeout(() => {
      state.pending.delete(id);
      state.worker?.terminate();
      state.worker = null;
      for (const job of state.pending.values()) job.reject(new Error("layout cancelled"));
      state.pending.clear();
      reject(new Error(`layout took longer than ${Math.round(timeoutMs / 1000)} s and was stopped`));
    }, timeoutMs);
    state.pending.set(id, { resolve, reject, timer, dot });
    state.worker.postMessage({ id, dot });
  });
}
