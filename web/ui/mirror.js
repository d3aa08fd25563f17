// Workbench settings shown again where a panel runs on them (chapter 6's searches), so the
// learner changes them where they read. Each control here is one more view of a setting in the
// store, as the workbench's control is: what the learner types goes to the store (checked by
// Python like any change, its error shown here and at the workbench), and what the store
// announces (Reset, a link, a Try this, the workbench) is drawn here. A setting a widget keeps
// fixed is not shown.

import { fieldError } from "./render.js";

/** controls: {setting name: control}; by: who these controls are, so a change they made is
 * not drawn back into them. */
export function mirrorSettings(store, controls, by) {
  const read = (c) => (c.type === "checkbox" ? c.checked : c.value);
  const badInput = (c) => Boolean(c.validity && c.validity.badInput);

  function write(name) {
    const c = controls[name];
    const value = store.state.raw[name];
    if (value === undefined) return;
    if (c.type === "checkbox") c.checked = Boolean(value);
    else if (c.value !== String(value)) c.value = value;
  }

  // a choice lists what the workbench's control lists (its options come from Python)
  function copyChoices(name) {
    const c = controls[name];
    const main = document.getElementById(name);
    if (c.tagName !== "SELECT" || !main) return;
    c.replaceChildren(...[...main.options].map((option) => option.cloneNode(true)));
  }

  for (const [name, c] of Object.entries(controls)) {
    c.addEventListener("input", () => store.edit(name, read(c), { badInput: badInput(c), by }));
    c.addEventListener("change", () => store.edit(name, read(c), { badInput: badInput(c), commit: true, by }));
  }

  store.subscribe((change, state) => {
    if (change.type === "info" || change.type === "datasets") {
      for (const name of Object.keys(controls)) {
        copyChoices(name);
        write(name);
      }
    } else if (change.type === "settings" && change.by !== by) {
      for (const name of change.names) if (controls[name]) write(name);
    } else if (change.type === "checked") {
      for (const [name, c] of Object.entries(controls)) fieldError(c, state.errors[name] || null);
    } else if (change.type === "phase") { // a widget fixes its settings before it says it is ready
      for (const [name, c] of Object.entries(controls)) c.closest(".field").hidden = store.isLocked(name);
      const box = Object.values(controls)[0].closest("fieldset");
      if (box) box.hidden = Object.keys(controls).every((name) => store.isLocked(name));
    }
  });
}
