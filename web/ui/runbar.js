// The run bar above the text: Generate, Stop and slow motion, enabled as the page's state allows
// (Generate when ready, Stop while a run goes on).

import { $ } from "./dom.js";

export function createRunBar(store, runs) {
  const dom = { generate: $("generate"), stop: $("stop-button"), slow: $("slow") };

  store.subscribe((change, state) => {
    if (change.type !== "phase") return;
    dom.generate.disabled = state.phase !== "ready";
    dom.stop.disabled = state.phase !== "generating";
    dom.slow.disabled = state.phase !== "ready" && state.phase !== "generating";
  });

  dom.stop.addEventListener("click", () => {
    if (!runs.stop()) return;
    dom.stop.disabled = true;
    store.announce({ type: "stopping" });
  });

  return {
    /** Generate as the button does, at the pace the slow-motion switch says. */
    generate: () => runs.generate({ slow: dom.slow.checked }),
    slow: () => dom.slow.checked,
  };
}
