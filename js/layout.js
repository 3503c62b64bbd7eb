// One layout worker shared by every fxviz widget on the page (anywidget loads this module
// once per widget, so the singleton lives on globalThis under a versioned key). A layout
// that runs past its time limit terminates the worker: WebAssembly cannot be interrupted.
/* global FXVIZ_WORKER_SOURCE */
const KEY = "__fxviz_layout_v1";

function shared() {
  globalThis[KEY] ??= { worker: null, url: null, nextId: 1, pending: new Map(), noWorker: false };
  return globalThis[KEY];
}

function startWorker(state) {
  state.url ??= URL.createObjectURL(new Blob([FXVIZ_WORKER_SOURCE], { type: "text/javascript" }));
  const worker = new Worker(state.url);
  worker.onmessage = (event) => {
    const { id, svg, error } = event.data;
    const job = state.pending.get(id);
    if (!job) return;
    state.pending.delete(id);
    clearTimeout(job.timer);
    error ? job.reject(new Error(error)) : job.resolve(svg);
  };
  worker.onerror = (event) => {
    for (const job of state.pending.values()) job.reject(new Error(event.message || "layout worker failed"));
    state.pending.clear();
    worker.terminate();
    state.worker = null;
  };
  return worker;
}

async function onMainThread(dot) {
  if (!globalThis.__fxvizLayoutMain) new Function(FXVIZ_WORKER_SOURCE)();
  return globalThis.__fxvizLayoutMain(dot);
}

export function layout(dot, { timeoutMs = 30000 } = {}) {
  const state = shared();
  if (!state.noWorker && !state.worker) {
    try {
      state.worker = startWorker(state);
    } catch {
      state.noWorker = true; // e.g. a Content-Security-Policy without blob: workers
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
    state.pending.set(id, { resolve, reject, timer });
    state.worker.postMessage({ id, dot });
  });
}
