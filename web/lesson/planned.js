// An experiment Python makes in batches (a `Planned` in decodelab.lesson.planned): the request is
// checked and planned by one endpoint, then made a batch at a time by another, so the progress
// bar moves and Stop works between two batches. Field errors are shown next to their inputs; a
// stopped or failed experiment keeps the last results on screen.

import { fieldError, plural } from "../ui/render.js";

const BATCH_MS = 80;

/** "Running: 12 of 40 runs, about 30 s left…": the time left at the rate measured so far (a
 * real model's runs take seconds each), once there is a rate to go by. `note`: Python's words
 * for what is counted, when a count needs them. */
export function runningStatus(done, total, spentMs, one = "run", many = "runs", note = null) {
  const left = done > 0 && spentMs > 2000 ? Math.round((spentMs / done) * (total - done) / 1000) : 0;
  return `Running: ${done} of ${plural(total, one, many)}${note ? ` (${note})` : ""}${left > 1 ? `, about ${left} s left` : ""}…`;
}

/** A rate with two significant digits at least: 0.15, 2.4, 37, 120. */
export function perSecond(n, seconds) {
  const x = n / seconds;
  const digits = x > 0 ? Math.max(2, Math.floor(Math.log10(x)) + 1) : 2;
  return x.toLocaleString("en", { maximumSignificantDigits: digits });
}

/** "Done: 6 requests, 240 steps, in 40.3 s (0.15 requests per second).": unit, what
 * result.runs counts; rate, what the rate counts; note, Python's words for the count. */
export function doneStatus(result, seconds, unit = ["run", "runs"], rate = unit, note = null) {
  const r = perSecond(result.runs, seconds);
  return `Done: ${plural(result.runs, ...unit)}${note ? ` (${note})` : ""}, ${result.steps.toLocaleString("en")} ${result.steps === 1 ? "step" : "steps"}, in ${seconds.toFixed(1)} s (${r} ${r === "1" ? rate[0] : rate[1]} per second).`;
}

/**
 * endpoints: [start, advance]; box: the panel (its data-state says idle, running, done,
 * invalid or error); inputs: {field name: control}; request(): the request from the inputs;
 * render(result): draw it; unit: what result.runs counts ([one, many]); rate: what the rate counts
 * (["answer", "answers"]; the unit unless said). Python's progress may name what it counts
 * (progress.unit, progress.note): the running status says it so.
 */
export function createPlanned({ call, endpoints, box, inputs, runButton, stop, progress, status, results, request, render, unit = ["run", "runs"], rate = unit }) {
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
        const counted = step.progress.unit || ["run", "runs"];
        status.textContent = runningStatus(step.progress.done, step.progress.total, performance.now() - began, ...counted, step.progress.note);
        if (step.done) {
          last = step.result;
          render(step.result);
          results.hidden = false;
          const seconds = (performance.now() - began) / 1000;
          status.textContent = doneStatus(step.result, seconds, unit, rate, step.progress.note);
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
