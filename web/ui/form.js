// The settings form: a view of the store's settings. What the learner types goes to the store
// (store.edit); what the store announces is drawn: values put in by Reset, a link, a host or
// Python, the errors next to their fields, the notes on settings greedy leaves unused, the
// settings that do not apply to this model, and "More rules (2 changed)". Every control's
// label, help, range and default were written into the page from Python's field table when the
// site was built (tools/page.py); every verdict comes from Python's check.

import { $, el } from "./dom.js";
import { fieldError, fixed, readable } from "./render.js";

export function createForm(store, { generate }) {
  const form = $("settings");
  const dom = {
    formError: $("form-error"),
    reset: $("reset"),
    slider: $("temperature-slider"),
    moreRules: $("more-rules"),
    moreCount: $("more-count"),
    modelHint: $("model-hint"),
    datasetHint: $("dataset-hint"),
    vocabList: $("vocab-list"),
    vocabSummary: $("vocab-summary"),
    vocabWords: $("vocab-words"),
  };
  // Settings controls by field name (the control's name attribute is the field name).
  const names = [...form.elements].map((c) => c.name).filter(Boolean);
  const controls = Object.fromEntries(names.map((name) => [name, form.elements[name]]));
  // The rules behind "More rules": the beginner's path shows the others first.
  const moreRules = [...dom.moreRules.querySelectorAll("[name]")].map((c) => c.name);
  const fieldOf = (name) => controls[name].closest(".field");

  const readRaw = (control) => (control.type === "checkbox" ? control.checked : control.value);

  // --- the learner's side: every change goes to the store ---------------------------------------

  form.addEventListener("input", (event) => {
    const name = event.target.name;
    if (!controls[name] || !store.state.info) return;
    if (name === "temperature") syncSlider();
    store.edit(name, readRaw(event.target), { badInput: Boolean(event.target.validity && event.target.validity.badInput) });
  });

  form.addEventListener("change", (event) => {
    const name = event.target.name;
    if (!controls[name] || !store.state.info) return;
    store.edit(name, readRaw(event.target), { badInput: Boolean(event.target.validity && event.target.validity.badInput), commit: true });
  });

  dom.reset.addEventListener("click", () => store.reset());

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    generate();
  });

  // Enter in a field generates (the form's own submit); Ctrl+Enter (or ⌘+Enter) does it from
  // anywhere, the stop strings' box included, where Enter starts a new line.
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey) || event.defaultPrevented) return;
    event.preventDefault();
    generate();
  });

  // The slider and the number box are one setting: moving one moves the other (the box is what
  // is read and checked; the slider covers the usual range).
  dom.slider.addEventListener("input", () => {
    controls.temperature.value = dom.slider.value;
    controls.temperature.dispatchEvent(new Event("input", { bubbles: true }));
  });

  function syncSlider() {
    const text = controls.temperature.value;
    const t = Number(text);
    if (text.trim() !== "" && Number.isFinite(t)) dom.slider.value = String(Math.min(t, Number(dom.slider.max)));
  }

  // --- the store's side: what it announces is drawn ---------------------------------------------

  store.subscribe((change, state) => {
    if (change.type === "info") return fillChoices(state);
    if (change.type === "phase") return setEnabled(state.phase === "ready" || state.phase === "generating");
    if (change.type === "datasets") return addDataset(state, change.name);
    if (change.type === "settings") {
      if (change.source !== "form" || change.by) { // not typed here: a panel's copy, Reset, ...
        for (const name of change.names) writeControl(name, state.raw[name]);
        if (change.names.includes("temperature")) syncSlider();
      }
      if (change.names.some((name) => ["dataset", "model", "tokenizer"].includes(name))) describeDataset(state);
      if (change.names.some((name) => moreRules.includes(name))) countChanged();
      return;
    }
    if (change.type === "checked") return drawCheck(state, change.focus);
  });

  function writeControl(name, value) {
    const control = controls[name];
    if (!control) return;
    if (control.type === "checkbox") control.checked = Boolean(value);
    else if (control.value !== value) control.value = value;
  }

  function drawCheck(state, focus) {
    const check = state.check;
    for (const name of names) showError(name, state.errors[name] || null);
    dom.formError.textContent = state.formError;
    dom.formError.hidden = !state.formError;
    if (check) {
      drawNotes(check.not_used || {});
      drawSaid(state.said);
      const applies = check.applies || {};
      for (const [name, on] of Object.entries(applies)) if (controls[name]) fieldOf(name).hidden = !on;
    }
    if (focus) {
      const first = names.find((name) => state.errors[name]);
      if (first) {
        if (dom.moreRules.contains(controls[first])) dom.moreRules.open = true;
        controls[first].focus();
      }
    }
  }

  function showError(name, message) {
    const control = controls[name];
    if (!$(`${control.id}-error`)) return;
    fieldError(control, message);
    fieldOf(name).classList.toggle("has-error", Boolean(message));
    // an error from a link, a script or a host page for a rule behind More rules: open it, so
    // the message is seen next to its field
    const folded = message && control.closest("details:not([open])");
    if (folded) folded.open = true;
    describe(control);
  }

  // Greedy (or temperature 0) leaves temperature and the filters unused: Python says which, and
  // in which words; the page shows it beside them.
  function drawNotes(notUsed) {
    for (const field of form.querySelectorAll("[data-sampling-only] [name]")) {
      const note = $(`${field.id}-na`);
      const text = notUsed[field.name] || null;
      field.closest(".field").classList.toggle("not-applying", Boolean(text));
      note.hidden = !text;
      note.textContent = text || "";
      describe(field);
    }
  }

  // A setting Python changed because of another (a tokenizer the data has not got), and why:
  // the sentence stays beside it until the next check.
  function drawSaid(said) {
    for (const name of names) {
      const control = controls[name];
      let note = $(`${control.id}-said`);
      if (!note && !said[name]) continue;
      if (!note) {
        note = el("p", "field-said");
        note.id = `${control.id}-said`;
        note.setAttribute("role", "status");
        fieldOf(name).append(note);
      }
      note.textContent = said[name] || "";
      note.hidden = !said[name];
      describe(control);
    }
  }

  // aria-describedby lists only what is visible: the hint, a "not used" note, what Python
  // changed and why, the error.
  function describe(control) {
    const ids = [`${control.id}-hint`, `${control.id}-na`, `${control.id}-said`, `${control.id}-error`]
      .filter((id) => { const node = $(id); return node && !node.hidden; });
    control.setAttribute("aria-describedby", ids.join(" "));
  }

  // "More rules (2 changed)": how many of the rules behind it differ from their defaults.
  function countChanged() {
    const changed = store.changed(moreRules);
    dom.moreCount.textContent = changed ? `(${changed} changed)` : "(all at their defaults)";
    dom.moreRules.dataset.changed = String(changed);
  }

  function setEnabled(on) {
    for (const control of Object.values(controls)) control.disabled = !on;
    dom.reset.disabled = !on;
    dom.slider.disabled = !on;
  }

  function fillChoices(state) {
    const info = state.info;
    replaceOptions(controls.model, (info.models || []).map((m) => [m.id, m.label || m.id]));
    replaceOptions(controls.dataset, Object.entries(state.datasets).map(([name, d]) => [name, d.label || name]));
  }

  function replaceOptions(select, pairs) {
    if (!pairs.length) return;
    select.replaceChildren(...pairs.map(([value, label]) => {
      const option = el("option", null, label);
      option.value = value;
      return option;
    }));
  }

  function addDataset(state, name) {
    let option = [...controls.dataset.options].find((o) => o.value === name);
    if (!option) {
      option = el("option", null, state.datasets[name].label || name);
      option.value = name;
      controls.dataset.append(option);
    }
  }

  // The dataset's words: what it is, a few examples, its size and held-out loss, and the
  // characters (or the first learned tokens) the model knows.
  function describeDataset(state) {
    const d = state.datasets[state.raw.dataset];
    if (!d) return;
    // what the model is, in Python's words (setup's models: the Model field's choices)
    const model = (state.info.models || []).find((m) => m.id === state.raw.model);
    dom.modelHint.textContent = model ? model.about : "";
    if (model && model.pretrained) { // its own data and tokens: its card's words
      dom.datasetHint.textContent = model.data;
      dom.vocabSummary.textContent = model.vocab_summary;
      dom.vocabWords.textContent = model.vocab_words;
      dom.vocabList.replaceChildren();
      return;
    }
    const lines = [];
    if (d.description) lines.push(d.description);
    if (Array.isArray(d.examples) && d.examples.length) {
      const shown = [];
      for (const x of d.examples) {
        const short = x.length > 48 ? `${x.slice(0, 47)}…` : x;
        if (shown.length && shown.join("").length + short.length > 60) break;
        shown.push(short);
      }
      lines.push(`For example: ${shown.join(" · ")}`);
    }
    const facts = [];
    const vocab = Array.isArray(d.vocab) ? d.vocab.filter((t) => t !== "<eos>") : [];
    const bpe = state.raw.tokenizer === "bpe" && d.bpe;
    if (vocab.length) facts.push(`${vocab.length} characters`);
    if (d.n_train != null) facts.push(`${d.n_train.toLocaleString("en")} training examples`);
    const nll = d.val_nll != null && typeof d.val_nll === "object" ? d.val_nll[state.raw.model] : d.val_nll;
    if (nll != null && !bpe) facts.push(`held-out loss ${fixed(nll, 2)} nats per character`);
    if (facts.length) lines.push(facts.join(" · ") + ".");
    dom.datasetHint.replaceChildren(...lines.map((line, i) => (i ? [el("br"), line] : [line])).flat());
    if (bpe) {
      dom.vocabList.replaceChildren(...d.bpe.first_merges.map((c) => el("span", "chip", readable(c))));
      dom.vocabSummary.textContent = `Tokens this model knows (${d.bpe.vocab_size})`;
      dom.vocabWords.textContent = `Any text: end-of-sequence, the 256 bytes (so nothing is ever unknown) and ${d.bpe.vocab_size - 257} pieces learned from the training text by merging the most frequent pairs. The first ones learned:`;
    } else {
      dom.vocabList.replaceChildren(...vocab.map((c) => el("span", "chip", readable(c))));
      dom.vocabSummary.textContent = `Characters this model knows (${vocab.length})`;
      dom.vocabWords.textContent = Array.isArray(d.vocab) ? `${d.vocab_words}. The prompt may use only these.` : "";
    }
  }

  // Only the chosen controls show (an embed's controls=): the others, the groups left empty and
  // their explanations are hidden (presence.js hides explanations of controls not shown); a
  // chosen control folded under More rules is unfolded.
  function only(chosen) {
    for (const name of names) {
      if (chosen.includes(name)) delete fieldOf(name).dataset.locked;
      else fieldOf(name).dataset.locked = "true";
    }
    for (const group of form.querySelectorAll(".group")) {
      const open = group.querySelector(".field[data-field]:not([data-locked])");
      if (!open) group.dataset.locked = "true";
      else if (group.tagName === "DETAILS") group.open = true;
    }
  }

  return {
    /** The settings the form has a control for, in the form's order. */
    names,
    /** A setting's label, in the form's words ("Temperature"); its name if it has no control. */
    label(name) {
      const label = form.querySelector(`label[for="${name}"]`);
      return label ? label.textContent.trim() : name;
    },
    only,
  };
}
