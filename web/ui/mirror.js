// Workbench settings shown again where a panel runs on them (chapter 6's searches), so the
// learner changes them where they read. Each control here is one more view of a setting in the
// store, as the workbench's control is: what the learner types goes to the store (checked by
// Python like any change, its error shown here and at the workbench), and what the store
// announces (Reset, a link, a Try this, the workbench) is drawn here. A setting a widget keeps
// fixed has no control here: the panel names it with its value instead.

import { fieldError, quoted } from "./render.js";

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
      sayFixed();
    } else if (change.type === "settings" && change.by !== by) {
      for (const name of change.names) if (controls[name]) write(name);
    } else if (change.type === "checked") {
      for (const [name, c] of Object.entries(controls)) fieldError(c, state.errors[name] || null);
      // a setting the model does not read (the real model's dataset) is hidden here as at the
      // workbench: Python's applies
      const applies = (state.check && state.check.applies) || {};
      for (const [name, c] of Object.entries(controls)) {
        if (name in applies) c.closest(".field").hidden = store.isLocked(name) || !applies[name];
      }
    } else if (change.type === "phase") { // a widget fixes its settings before it says it is ready
      for (const [name, c] of Object.entries(controls)) c.closest(".field").hidden = store.isLocked(name);
      sayFixed();
    }
  });

  // The settings a widget keeps fixed are said with their values where their copies would be, so
  // the panel still shows everything it runs on.
  const box = Object.values(controls)[0].closest("fieldset");
  const note = document.createElement("p");
  note.className = "mirror-fixed";
  if (box) box.append(note);
  function sayFixed() {
    const fixed = Object.keys(controls).filter((name) => store.isLocked(name));
    note.hidden = !fixed.length;
    note.textContent = fixed.length ? `Kept fixed by this widget: ${fixed.map((name) => `${labelOf(name)} (${shown(name)})`).join(", ")}.` : "";
  }

  // the copy's own label, without the words only a screen reader hears
  function labelOf(name) {
    const label = document.querySelector(`label[for="${controls[name].id}"]`);
    if (!label) return name;
    const words = label.cloneNode(true);
    for (const hidden of words.querySelectorAll(".visually-hidden")) hidden.remove();
    return words.textContent.trim();
  }

  function shown(name) {
    const c = controls[name];
    const value = store.state.raw[name];
    if (c.type === "checkbox") return value ? "on" : "off";
    if (c.tagName === "SELECT") {
      const option = [...c.options].find((o) => o.value === String(value));
      return option ? option.textContent : String(value);
    }
    return value === "" ? "empty" : name === "prompt" ? quoted(value) : String(value);
  }
}
