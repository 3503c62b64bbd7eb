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
export function layout(dot, options = {}) {
  const state = shared();
  const kept = state.cache.get(dot);
  if (kept !== undefined) return Promise.resolve(kept);
  state.running ??= new Map(); // dot -> its layout's promise, while the worker makes it
  const running = state.running.get(dot);
  if (running) return running;
  const job = layoutNew(state, dot, options)
    .then((svg) => { state.cache.put(dot, svg); return svg; })
    .finally(() => state.running.delete(dot));
  state.running.set(dot, job);
  return job;
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
