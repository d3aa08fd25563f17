// What both search panels do when asked to run: check the workbench's settings (their errors
// show at the workbench), send them to Python with the panel's own fields, and show each of
// Python's field errors next to its control (the others in the status line); a good reply is
// drawn by the panel (show) and the panel says it is done. While it runs, Stop gives the search
// up between two of its slices (a search on the real model takes many seconds). A worker lost
// on the way is said as what happened, not as a field's fault. The results on screen belong to
// the model they were searched with: when the workbench's model changes, they go. The panel's
// data-state says running, then done, invalid, stopped or lost.

import { fieldError, formSettings } from "../ui/render.js";

/** What the status line says when a search ended without results: Stop, a lost worker, or
 * Python's errors (those of the panel's own fields are shown next to them: `marked`). */
export function failedSentence(reply, marked) {
  if (reply.stopped) return (reply.errors || [])[0]?.message || "Stopped.";
  if (reply.lost) return `${reply.lost} The search went with it and nothing of it was kept; once Python is back, search again.`;
  const other = (reply.errors || []).filter((e) => !marked.includes(e.field)).map((e) => e.message);
  return other.length ? other.join(" ") : "Fix the field marked above.";
}

/**
 * app: the page; controls: {field name: control}; form, section, status, button, stop, out: the
 * panel's (stop: its Stop button; out: where its results are drawn); endpoint: Python's; key:
 * what the panel's fields travel as ({settings, [key]: own()}); working: the status while it
 * runs; show(reply): draw a good reply. The form's submit runs it.
 * Returns run() (the reply, ok or not, or null when nothing was sent), runWith(values) (the
 * panel's fields by name set first, as a learner types them), own() (the panel's fields as they
 * stand) and fromLink() (put in the panel's fields a link gave).
 */
export function createSearchAsk({ app, controls, form, section, status, button, stop, out, endpoint, key, working, show }) {
  let busy = false;
  let call = null; // the search in flight: {reply, stop}
  let shownModel = null; // the model the results on screen were searched with
  const own = () => Object.fromEntries(Object.entries(controls).map(([name, c]) => [name, c.value]));

  function clear() {
    out.hidden = true;
    shownModel = null;
    if (section.dataset.state !== "running") {
      status.textContent = "";
      section.dataset.state = "idle";
    }
  }

  async function run() {
    if (busy) return null;
    for (const c of Object.values(controls)) fieldError(c, null);
    busy = true;
    const settings = await formSettings(app, status);
    busy = false;
    if (!settings) return null;
    busy = true;
    section.dataset.state = "running";
    status.textContent = working;
    button.disabled = true;
    stop.hidden = false;
    stop.disabled = false;
    let reply;
    try {
      call = app.stoppable(endpoint, { settings, [key]: own() });
      reply = await call.reply;
    } catch (err) { // the worker was lost (its words), and every call in flight with it
      reply = { ok: false, lost: err.message };
    } finally {
      call = null;
      busy = false;
      button.disabled = false;
      stop.hidden = true;
    }
    app.last[endpoint] = reply;
    if (!reply.ok) {
      const marked = [];
      for (const e of reply.errors || []) {
        if (controls[e.field] && !reply.stopped) {
          fieldError(controls[e.field], e.message);
          marked.push(e.field);
        }
      }
      if (shownModel !== null && shownModel !== settings.model) clear(); // another model's
      status.textContent = failedSentence(reply, marked);
      section.dataset.state = reply.stopped ? "stopped" : reply.lost ? "lost" : "invalid";
      return reply;
    }
    show(reply);
    shownModel = settings.model;
    status.textContent = "Done.";
    section.dataset.state = "done";
    return reply;
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  stop.addEventListener("click", () => {
    if (!call) return;
    stop.disabled = true;
    status.textContent = "Stopping…";
    call.stop();
  });
  // results searched with another model than the workbench's now are not this model's
  app.store.subscribe((change) => {
    if (change.type === "settings" && change.names.includes("model") && shownModel !== null
        && app.store.state.raw.model !== shownModel) clear();
  });
  return {
    run,
    runWith(values) {
      for (const [name, value] of Object.entries(values)) controls[name].value = String(value);
      return run();
    },
    own,
    // the panel's own settings a link gave (Python checks them when the search runs)
    fromLink() {
      for (const [name, value] of Object.entries(app.fromLink(Object.keys(controls)))) controls[name].value = value;
    },
  };
}
