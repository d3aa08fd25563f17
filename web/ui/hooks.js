// window.decodelab: what tests, the benchmark and embedding pages can ask of the page and wait on
// instead of sleeping. A facade over the store, the run and the worker: nothing here keeps state
// of its own.

export function createHooks({ store, runs, client, text, ready }) {
  const call = client.call;
  const hooks = {
    ready,
    get lastRun() {
      return runs.lastRun;
    },
    get state() {
      return document.documentElement.dataset.state;
    },
    get info() {
      return store.state.info;
    },
    trace: () => runs.trace(),
    // The step records of the run on screen, as the page holds them (the live check's verdicts
    // arrive behind the text: cache_ok is null until then).
    steps: () => (store.state.run ? store.state.run.steps : []),
    // Start a run with exactly these settings, skipping the page's own checks (Python still
    // checks them; errors appear next to the fields); once it starts, the form shows the
    // settings it runs with. Resolves like lastRun.
    generate: (settings) => (store.state.phase === "ready"
      ? runs.start(settings, { show: true })
      : Promise.reject(new Error(`not ready (state ${store.state.phase})`))),
    probs: (req) => call("probs", req),
    bench: (settings) => call("bench", settings),
    benchTokenize: (req) => call("bench_tokenize", req),
    benchTools: (req) => call("bench_tools", req || {}),
    benchJson: (req) => call("bench_json", req || {}),
    benchSpeculative: (req) => call("bench_speculative", req || {}),
    benchPaged: (req) => call("bench_paged", req || {}),
    benchReal: (req) => call("bench_real", req || {}),
    // any endpoint of decodelab.entry.webapi, as a panel asks it (a long one runs in slices)
    callEndpoint: (endpoint, req) => call(endpoint, req || {}),
    // Resolves once Python's check of the form as it is now is back, and every view has been
    // told (a check waiting for a pause in typing runs now).
    settled: () => store.settled().then(() => true),
    // Put values into the form, as Reset does (Python checks them).
    applySettings: (values) => store.apply(values),
    // Keep these settings as they are (an embed's hidden controls), and what Reset goes back to.
    lock: (values, baseline) => store.lock(values, baseline),
    isLocked: (name) => store.isLocked(name),
    timings: null, // boot phases in ms, from the worker, once ready
    // Memory the worker holds (WebAssembly memory, live Python objects) and its restarts.
    memory: () => client.request({ type: "memory-report" }).then((m) => m.result),
    // The worker's longest job (one slice of long work) since the last reset: {ms, what}.
    longestJob: (reset = false) => client.request({ type: "job-report", reset }).then((m) => m.result),
    get health() {
      const w = client.worker;
      return { ...w.stats, recovering: w.recovering, interruptible: w.interruptible, shared: w.shared, sealedText: text.sealedCount };
    },
  };
  if (client.worker.faults) hooks.injectFault = (kind) => client.worker.injectFault(kind); // tests only: ?faults=1
  return hooks;
}
