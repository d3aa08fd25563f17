// What both search panels do when asked to run: check the workbench's settings (their errors
// show at the workbench), send them to Python with the panel's own fields, and show each of
// Python's field errors next to its control (the others in the status line). The panel's
// data-state says running, then invalid; the caller draws a good reply and says done.

import { ask, fieldError, formSettings } from "../ui/render.js";

/**
 * app: the page; controls: {field name: control}; section, status, button: the panel's;
 * endpoint: Python's; key: what the panel's fields travel as ({settings, [key]: own()});
 * field: where an error of the call itself is shown; working: the status while it runs.
 * Returns ask(): the reply (ok or not), or null when nothing was sent.
 */
export function createSearchAsk({ app, controls, section, status, button, endpoint, key, field, working }) {
  let busy = false;
  const own = () => Object.fromEntries(Object.entries(controls).map(([name, c]) => [name, c.value]));
  return async function searchAsk() {
    if (busy) return null;
    for (const c of Object.values(controls)) fieldError(c, null);
    busy = true;
    const settings = await formSettings(app, status);
    busy = false;
    if (!settings) return null;
    busy = true;
    section.dataset.state = "running";
    status.textContent = working;
    const reply = await ask(app, endpoint, { settings, [key]: own() }, button, field);
    busy = false;
    app.last[endpoint] = reply;
    if (!reply.ok) {
      const other = [];
      for (const e of reply.errors || []) {
        if (controls[e.field]) fieldError(controls[e.field], e.message);
        else other.push(e.message);
      }
      status.textContent = other.length ? other.join(" ") : "Fix the field marked above.";
      section.dataset.state = "invalid";
    }
    return reply;
  };
}
