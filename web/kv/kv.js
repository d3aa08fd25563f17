// The KV cache in the page: the live cache check (cache.js), the batch view (batch.js), break it on
// purpose (bugs.js), what the cache costs (costs.js) and both models side by side (compare.js).
// app.js creates it once; each part follows the store itself. Every number comes from Python;
// no user or model text is ever parsed as HTML.

import { createBatchView } from "./batch.js";
import { createBugs } from "./bugs.js";
import { createLiveCheck } from "./cache.js";
import { createCompare } from "./compare.js";
import { createMemoryView } from "./costs.js";

export function createKvLab(app) {
  const live = createLiveCheck(app);
  const batch = createBatchView(app);
  const lab = createBugs(app, batch);
  const memory = createMemoryView(app, live);
  const compare = createCompare(app);
  app.store.subscribe((change) => {
    if (change.type === "run-start") live.runStarted(change.run);
    else if (change.type === "steps") live.steps(change.run);
    else if (change.type === "run-end") live.runDone(change.run);
    else return;
    if (change.type !== "run-start") memory.liveUpdate();
  });
  return {
    live, lab, batch, memory, compare,
    last: app.last, // each panel's latest reply from Python
    // The benchmark: one transformer generation timed inside Python (webapi.bench_generation).
    bench: (request) => app.call("bench_generation", request),
    ready() {
      lab.ready();
      batch.ready();
      memory.ready();
      compare.ready();
    },
  };
}

