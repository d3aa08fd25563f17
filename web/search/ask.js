// What both search panels do when asked to run: check the workbench's settings (their errors
// show at the workbench), send them to Python with the panel's own fields, and show each of
// Python's field errors next to its control (the others in the status line); a good reply is
// drawn by the panel (show) and the panel says it is done. The panel's data-state says
// running, then invalid or done.

import { ask, fieldError, formSettings } from "../ui/render.js";

/**
 * app: the page; controls: {field name: control}; form, section, status, button: the panel's;
 * endpoint: Python's; key: what the panel's fields travel as ({settings, [key]: own()});
 * field: where an error of the call itself is shown; working: the status while it runs;
 * show(reply): draw a good reply. The form's submit runs it.
 * Returns run() (the reply, ok or not, or null when nothing was sent), runWith(values) (the
 * panel's fields by name set first, as a learner types them), own() (the panel's fields as they
 * stand) and fromLink() (put in the panel's fields a link gave).
 */
export function createSearchAsk({ app, controls, form, section, status, button, endpoint, key, field, working, show }) {
  let busy = false;
  const own = () => Object.fromEntries(Object.entries(controls).map(([name, c]) => [name, c.value]));
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
      return reply;
    }
    show(reply);
    status.textContent = "Done.";
    section.dataset.state = "done";
    return reply;
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
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
