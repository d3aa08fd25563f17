// The start-up line at the top of the page: Python's progress phase by phase (with the bytes that
// have come), Ready and how long the start took, a start-up that failed and why, and what the
// worker's troubles mean for the learner. It draws what the worker and the store say.

import { $ } from "./dom.js";
import { seconds } from "./render.js";

const PHASES = ["runtime", "numpy", "decodelab", "assets"];

export function createBoot(store) {
  const root = document.documentElement;
  const dom = {
    status: $("status"),
    box: $("boot"),
    time: $("boot-time"),
    more: $("boot-more"),
    breakdown: $("boot-breakdown"),
    progress: $("boot-progress"),
    phases: $("phases"),
    error: $("boot-error"),
    errorMessage: $("boot-error-message"),
    credits: $("credits"),
  };

  store.subscribe((change, state) => {
    if (change.type === "phase") root.dataset.state = change.phase;
    if (change.type === "info") credits(state.info);
    if (change.type !== "worker") return;
    const { what, message, ms } = change;
    if (what === "lost") dom.status.textContent = `${message} Starting it again…`;
    else if (what === "restarted") dom.status.textContent = `${message} Python was started again in ${seconds(ms)}. Your settings are kept.`;
    else if (what === "interrupted") dom.status.textContent = `Python stopped answering for ${seconds(ms)}, so the call it was stuck in was interrupted. Everything else is kept.`;
    else if (what === "restart-failed") failed(message);
  });

  function progress(m) {
    if (root.dataset.state !== "loading") return; // late news after a failure
    dom.status.textContent = m.label;
    dom.progress.value = m.fraction;
    dom.time.textContent = seconds(m.ms);
    const index = PHASES.indexOf(m.phase);
    for (const li of dom.phases.children) {
      const i = PHASES.indexOf(li.dataset.phase);
      li.dataset.state = m.phase === "ready" || i < index ? "done" : i === index ? "active" : "pending";
      if (li.dataset.state === "active") li.setAttribute("aria-current", "step");
      else li.removeAttribute("aria-current");
    }
  }

  function ready(t) {
    dom.status.textContent = t.joined
      ? "Ready. This widget joined the Python this site already had running in this browser."
      : `Ready. Python started in ${seconds(t.total_ms || 0)}${t.snapshot === "restored" ? ", from what this browser kept of its last start" : ""}.`;
    // the parts of the start, for those who want them, folded away from the lesson's first lines
    const parts = [
      ["Python runtime", t.runtime_ms], ["numpy", t.numpy_ms], ["decodelab package", t.decodelab_ms], ["models and text", t.assets_ms],
    ].filter(([, ms]) => ms != null);
    dom.time.textContent = "";
    dom.breakdown.textContent = parts.map(([what, ms]) => `${what} ${seconds(ms)}`).join(" · ");
    dom.more.hidden = !parts.length;
    dom.box.classList.add("is-ready");
  }

  /** The start-up failed: say where and why (once). */
  function failed(message, remedy = null) {
    if (root.dataset.state === "error") return;
    store.setPhase("error");
    const at = [...dom.phases.children].find((li) => li.dataset.state === "active");
    dom.status.textContent = at ? `Start-up stopped at: ${at.textContent.trim()}.` : "Start-up stopped.";
    dom.box.classList.add("is-failed");
    for (const li of dom.phases.children) {
      if (li.dataset.state === "active") li.dataset.state = "failed";
    }
    dom.error.hidden = false;
    dom.errorMessage.textContent = message;
    if (remedy) dom.error.querySelector(".boot-error-hint").textContent = remedy;
  }

  function credits(info) {
    const parts = Object.values(info.datasets || {}).map((d) => [d.label, d.source, d.licence && `licence: ${d.licence}`].filter(Boolean).join(", "));
    dom.credits.textContent = `decodelab ${info.version || ""}.${parts.length ? ` Training text: ${parts.join("; ")}.` : ""}`;
  }

  return { progress, ready, failed };
}
