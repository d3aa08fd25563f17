// An experiment Python makes in batches (a `Planned` in decodelab.lesson.planned): the request is
// checked and planned by one endpoint, then made a batch at a time by another, so the progress
// bar moves and Stop works between two batches. Field errors are shown next to their inputs; a
// stopped or failed experiment keeps the last results on screen.

import { fieldError, plural } from "../ui/render.js";

const BATCH_MS = 80;

/** "Running: 12 of 40 runs, about 30 s left…": the time left at the rate measured so far (a
 * real model's runs take seconds each), once there is a rate to go by. */
export function runningStatus(done, total, spentMs, one = "run", many = "runs") {
  const left = done > 0 && spentMs > 2000 ? Math.round((spentMs / done) * (total - done) / 1000) : 0;
  return `Running: ${done} of ${plural(total, one, many)}${left > 1 ? `, about ${left} s left` : ""}…`;
}

/**
 * endpoints: [start, advance]; box: the panel (its data-state says idle, running, done,
 * invalid or error); inputs: {field name: control}; request(): the request from the inputs;
 * render(result): draw it; rate: what a run is called in the status ("questions", "answers").
 */
export function createPlanned({ call, endpoints, box, inputs, runButton, stop, progress, status, results, request, render, rate = "runs" }) {
  let running = false;
  let stopped = false;
  let last = null;

  function setRunning(on) {
    running = on;
    runButton.disabled = on;
    stop.hidden = !on;
    progress.hidden = !on;
    if (on) stop.focus();
    else if (document.activeElement === stop || document.activeElement === document.body) runButton.focus();
  }

  function refused(errors) {
    const other = [];
    for (const e of errors || []) {
      if (inputs[e.field]) fieldError(inputs[e.field], e.message);
      else other.push(e.message);
    }
    status.textContent = other.length ? other.join(" ") : "Fix the field marked above.";
    box.dataset.state = "invalid";
    const first = Object.values(inputs).find((c) => c.getAttribute("aria-invalid") === "true");
    if (first) first.focus();
  }

  async function start() {
    if (running) return null;
    for (const name of Object.keys(inputs)) fieldError(inputs[name], null);
    stopped = false;
    setRunning(true);
    box.dataset.state = "checking"; // at once: the last answer on show is not this run's
    status.textContent = "Starting…";
    try {
      const started = await call(endpoints[0], request());
      if (!started.ok) {
        refused(started.errors);
        return null;
      }
      progress.max = started.progress.total;
      progress.value = 0;
      box.dataset.state = "running";
      const began = performance.now();
      for (;;) {
        if (stopped) {
          status.textContent = "Stopped. The last results stay; run it again when you like.";
          box.dataset.state = results.hidden ? "idle" : "done";
          return null;
        }
        const step = await call(endpoints[1], { budget_ms: BATCH_MS });
        if (!step.ok) throw new Error((step.errors || []).map((e) => e.message).join(" "));
        progress.value = step.progress.done;
        status.textContent = runningStatus(step.progress.done, step.progress.total, performance.now() - began);
        if (step.done) {
          last = step.result;
          render(step.result);
          results.hidden = false;
          const seconds = (performance.now() - began) / 1000;
          status.textContent = `Done: ${plural(step.result.runs, "run", "runs")}, ${step.result.steps.toLocaleString("en")} steps, in ${seconds.toFixed(1)} s (${(step.result.runs / seconds).toFixed(1)} ${rate} per second).`;
          box.dataset.state = "done";
          return step.result;
        }
      }
    } catch (err) {
      status.textContent = `The experiment stopped with an error: ${err.message}`;
      box.dataset.state = "error";
      return null;
    } finally {
      if (running) setRunning(false);
    }
  }

  runButton.form.addEventListener("submit", (event) => {
    event.preventDefault();
    start();
  });
  stop.addEventListener("click", () => {
    stopped = true;
    status.textContent = "Stopping after this batch…";
  });
  return { start, last: () => last };
}
