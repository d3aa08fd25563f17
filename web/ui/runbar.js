// The run bar above the text: Generate, Stop and slow motion, enabled as the page's state allows
// (Generate when ready, Stop while a run goes on), and, when Python refuses a run, why, next to
// the button that was pressed (the text below is still the last run's).

import { $ } from "./dom.js";

/** Why a run was refused, from the labels of the fields at fault (Python's: "Top-p", "The
 * conversation"): each named, and what to do. */
export function refusedWords(labels) {
  const names = labels.map((label) => label.replace(/^The /, "the "));
  const list = names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`;
  return `Not generated: change ${list} as ${names.length === 1 ? "its message says" : "their messages say"}, then try again.`;
}

export function createRunBar(store, runs) {
  const dom = { generate: $("generate"), stop: $("stop-button"), slow: $("slow"), refused: $("run-refused") };

  store.subscribe((change, state) => {
    if (change.type === "asked") dom.refused.hidden = true;
    if (change.type === "result") refused(change.result || {});
    if (change.type !== "phase") return;
    dom.generate.disabled = state.phase !== "ready";
    dom.stop.disabled = state.phase !== "generating";
    dom.slow.disabled = state.phase !== "ready" && state.phase !== "generating";
  });

  function refused(result) {
    const errors = result.status === "invalid" ? result.errors || [] : [];
    dom.refused.hidden = !errors.length;
    if (!errors.length) return;
    const labels = [...new Set(errors.map((e) => e.label || store.state.specs[e.field]?.label || e.field))];
    dom.refused.textContent = `${refusedWords(labels)}${store.state.run ? " The text below is from the last run." : ""}`;
  }

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
