// "Embed this": the snippets that put the workbench, as it is set now, into a course page.
//
// The author picks the panels and, if they like, the only controls a learner may touch; the
// dialog writes an iframe (any course page or learning platform) and the custom element (pages
// that allow scripts), and shows the iframe itself at the chosen size. The preview's address is
// the snippet's, so what the author sees is what the course page gets.
//
// Only settings that differ from the page's defaults go into the link (the widget starts from the
// same defaults), so a snippet says what is special about it.

import { settingsQuery } from "../state/settings.js";
import { copyText, flash } from "../ui/copy.js";
import { $ } from "../ui/dom.js";
import { fieldError } from "../ui/render.js";
import { DEFAULT_PANELS, NAMESPACE, VERSION } from "./embed.js";

const TITLE = "decodelab: watch a language model pick text";
const LIMITS = { height: [200, 4000], width: [280, 1600] };
// A panel's result, hidden until it has run (the panel grows then).
const NOT_RUN = ".kv-result[hidden], .xp-results[hidden], [id$='-out'][hidden]";

/** What the widget in this preview frame still waits for: "load" (its real model, not loaded:
 * loading adds the model's facts, and its chat where the link asks for it), "run" (a panel it
 * shows that has not run yet), or null (nothing, or the frame is unreadable). A panel the link
 * does not show is not waited for (its result stays hidden for good). */
function waitsFor(frame) {
  try {
    const doc = frame.contentDocument;
    if (!doc) return null;
    const shown = (node) => node && !node.closest("[hidden], [data-panel-off]");
    if (shown(doc.getElementById("pretrained-load"))) return "load";
    return [...doc.querySelectorAll(NOT_RUN)].some((node) => !node.parentElement.closest("[hidden], [data-panel-off]")) ? "run" : null;
  } catch {
    return null;
  }
}

const WAITING = {
  load: " That is before its model is loaded, and it grows when the model is loaded and when it runs: load it in the preview to measure it then, or use the custom element, which follows the widget’s height.",
  run: " That is before it has run, and it grows when it runs: run it in the preview to measure it after a run, or use the custom element, which follows the widget’s height.",
};

// Panels whose heading does not say what they are.
const PANEL_WORDS = {
  chat: "The chat with the real model, once it is loaded",
  controls: "The rules: the settings and the next token",
  text: "The run and its text",
  train: "Train on your own text",
};

function escapeAttr(text) {
  return String(text).replaceAll("&", "&amp;").replaceAll('"', "&quot;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

function check(id, input) {
  const [lo, hi] = LIMITS[id];
  const text = input.value.trim();
  const n = Number(text);
  if (text === "" || !Number.isInteger(n) || n < lo || n > hi) {
    return { error: `${id === "height" ? "Height" : "Preview width"} must be a whole number of pixels from ${lo} to ${hi}; got ${text === "" ? "nothing" : JSON.stringify(text)}.` };
  }
  return { value: n };
}

/** The snippets for one choice of settings, panels, controls, size, theme and start. */
export function snippets(base, { values, names, panels, controls, theme, lazy, height }) {
  const query = settingsQuery(values, names, {
    panels: panels.join(","),
    controls: controls ? controls.join(",") : null,
    theme: theme !== "auto" ? theme : null,
    lazy: lazy !== "view" ? lazy : null,
  });
  // commas read better as they are, and mean the same in a query
  const src = new URL(`embed.html?${query.replaceAll("%2C", ",")}`, base).href;
  const iframe = `<iframe src="${escapeAttr(src)}"\n        title="${TITLE}"\n        width="100%" height="${height}" style="border:0" loading="lazy" allow="clipboard-write"></iframe>`;
  const attrs = [];
  for (const name of names) {
    if (!(name in values)) continue;
    const value = Array.isArray(values[name]) ? values[name].join("\n") : String(values[name]);
    attrs.push(`${name.replaceAll("_", "-")}="${escapeAttr(value)}"`);
  }
  attrs.push(`panels="${panels.join(",")}"`);
  if (controls) attrs.push(`controls="${controls.join(",")}"`);
  if (theme !== "auto") attrs.push(`theme="${theme}"`);
  if (lazy !== "view") attrs.push(`lazy="${lazy}"`);
  const lines = [];
  let line = "<decodelab-embed";
  for (const attr of attrs) {
    if (line.length + attr.length > 72) {
      lines.push(line);
      line = "                ";
    }
    line += ` ${attr}`;
  }
  lines.push(`${line}></decodelab-embed>`);
  const element = `<script type="module" src="${escapeAttr(new URL("element.js", base).href)}"></script>\n${lines.join("\n")}`;
  return { src, iframe, element };
}

export function installEmbedder({ store, hooks, form: settingsForm }) {
  const dialog = $("embed-dialog");
  const opener = $("embed-open");
  if (!dialog || !opener || hooks.share?.view.embed) return null;
  const form = $("embed-form");
  const panelBox = $("embed-panels");
  const controlBox = $("embed-controls");
  const some = $("embed-controls-some");
  const inputs = { height: $("embed-height"), width: $("embed-width") };
  const outIframe = $("embed-iframe");
  const outElement = $("embed-element");
  const status = $("embed-status");
  const frameBox = $("embed-preview-box");
  const caption = $("embed-preview-caption");
  const measuredHint = $("embed-height-measured");
  const base = new URL("./", location.href);
  $("embed-element-site").textContent = base.href;
  const embedder = { last: null, preview: null, measured: null };
  let timer = 0;
  // The iframe's height follows the preview: the widget tells its parent its height whenever it
  // changes (as it tells a course page), so the snippet's height is the measured one, for these
  // panels at this width, until the author types a height of their own.
  let ownHeight = false;
  inputs.height.addEventListener("input", () => { ownHeight = true; });
  window.addEventListener("message", (event) => {
    const frame = frameBox.querySelector("iframe");
    const m = event.data;
    if (!frame || event.source !== frame.contentWindow || !m || m[NAMESPACE] !== VERSION || m.type !== "height") return;
    if (!Number.isFinite(m.height) || m.height <= 0) return;
    embedder.measured = { height: m.height, width: embedder.last?.width, src: frame.dataset.src };
    measuredHint.textContent = `Measured in the preview: ${m.height} pixels at ${embedder.last?.width} wide.${WAITING[waitsFor(frame)] || ""}`;
    measuredHint.hidden = false;
    if (ownHeight) return;
    const [lo, hi] = LIMITS.height;
    inputs.height.value = String(Math.min(hi, Math.max(lo, Math.ceil(m.height / 10) * 10)));
    update({ now: true });
  });

  // One checkbox per panel and per control, made when the dialog opens and removed when it
  // closes, so its labels ("Temperature", "Try this") never shadow the page's own for a search
  // by name. Choices carry over from one opening to the next.
  const choices = { panels: [...DEFAULT_PANELS], controls: [] };
  function fillChoices() {
    const onPage = [...new Set([...document.querySelectorAll("main [data-panel]")].map((n) => n.dataset.panel))];
    // the usual three first, then the rest in the page's order
    const panelNames = [...DEFAULT_PANELS.filter((p) => onPage.includes(p)), ...onPage.filter((p) => !DEFAULT_PANELS.includes(p))];
    panelBox.replaceChildren(...panelNames.map((name) => {
      const node = document.querySelector(`main [data-panel="${name}"]`);
      const heading = node.querySelector("h2, h3, summary");
      const words = PANEL_WORDS[name] || (heading ? heading.textContent.trim() : name);
      return checkbox("embed-panel", name, words, choices.panels.includes(name), name);
    }));
    controlBox.replaceChildren(...settingsForm.names.map((name) => {
      const words = settingsForm.label(name);
      const box = checkbox("embed-control", name, words, choices.controls.includes(name));
      // its own name, so "Temperature" still names one control on the page (tests find it so)
      box.querySelector("input").setAttribute("aria-label", `Show the ${words} control`);
      return box;
    }));
  }

  function checkbox(prefix, value, words, checked, note) {
    const span = document.createElement("span");
    span.className = "pg-radio";
    const input = document.createElement("input");
    input.type = "checkbox";
    input.id = `${prefix}-${value}`;
    input.value = value;
    input.checked = checked;
    const label = document.createElement("label");
    label.htmlFor = input.id;
    label.textContent = words;
    if (note) {
      const code = document.createElement("code");
      code.textContent = note;
      label.append(" ", code);
    }
    span.append(input, label);
    return span;
  }

  const chosen = (box) => [...box.querySelectorAll("input:checked")].map((c) => c.value);

  // The workbench's settings that differ from the defaults, checked as a link would be.
  function carried(python) {
    const values = { ...python.values };
    const errors = python.errors;
    const defaults = hooks.info?.defaults || {};
    const shipped = (hooks.info?.fields || []).find((f) => f.name === "dataset")?.choices || [];
    const notes = [];
    if (values.dataset !== undefined && !shipped.includes(values.dataset)) {
      notes.push("Your own training text stays in this page, so the widget uses the default dataset.");
      delete values.dataset;
    }
    const applies = python.applies || {}; // (a model with its own data takes no dataset)
    const names = store.state.names.filter((n) => n in values && applies[n] !== false && JSON.stringify(values[n]) !== JSON.stringify(defaults[n]));
    const shown = names.map((n) => {
      const v = values[n];
      return `${settingsForm.label(n)} ${Array.isArray(v) ? v.map((s) => JSON.stringify(s)).join(" ") : typeof v === "string" ? JSON.stringify(v) : v}`;
    });
    const words = names.length
      ? `From the workbench: ${shown.join(", ")}. Every other setting is the default.`
      : "The workbench has the default settings, so the link carries none.";
    if (errors.length) notes.push(`Left out until fixed on the workbench: ${errors.map((e) => e.field).join(", ")}.`);
    return { values, names, words: [words, ...notes].join(" ") };
  }

  // The dialog's own choices (panels, controls, size, theme, start) take effect at once, with the
  // workbench's settings as Python last checked them (the modal dialog keeps the workbench as it
  // is); Python's verdict, asked for each time, then brings them up to date. So a typed height
  // never waits for Python, even while the preview's own Python starts beside the page's.
  let verdict = null;
  function update({ now = false } = {}) {
    render(now);
    store.settled().then((checked) => {
      verdict = checked;
      render(now);
    }, () => {}); // a worker being replaced: its next check answers
  }

  function render(now) {
    const panels = chosen(panelBox);
    const controlsOn = panels.includes("controls");
    $("embed-controls-set").disabled = !controlsOn;
    for (const c of controlBox.querySelectorAll("input")) c.disabled = !controlsOn || !some.checked;
    const controls = some.checked ? chosen(controlBox) : null;
    const size = { height: check("height", inputs.height), width: check("width", inputs.width) };
    fieldError(null, panels.length ? null : "Choose at least one panel.", $("embed-panels-error"));
    fieldError(null, controlsOn && controls && !controls.length ? "Choose at least one control, or All of them." : null, $("embed-controls-error"));
    for (const id of ["height", "width"]) fieldError(inputs[id], size[id].error, $(`embed-${id}-error`));
    const bad = !panels.length || (controlsOn && controls && !controls.length) || size.height.error || size.width.error;
    if (!verdict) return; // the first verdict is on its way
    const settings = carried(verdict);
    $("embed-carried").textContent = settings.words;
    if (bad) {
      status.textContent = "Fix the choice marked above; the snippets show the last good one.";
      return;
    }
    status.textContent = "";
    const spec = {
      values: settings.values, names: settings.names, panels, controls: controlsOn ? controls : null,
      theme: $("embed-theme").value, lazy: $("embed-lazy").value, height: size.height.value,
    };
    const out = snippets(base, spec);
    outIframe.value = out.iframe;
    outElement.value = out.element;
    const same = embedder.last && embedder.last.src === out.src;
    embedder.last = { ...spec, ...out, width: size.width.value };
    clearTimeout(timer);
    // a new size resizes the preview at once; a new address waits for a pause in the choosing
    // (each address is a new widget with its own Python)
    timer = setTimeout(preview, now || same ? 0 : 600);
  }

  // The iframe of the snippet, at the chosen size. A new address loads a new widget (with its own
  // Python); a new size only resizes it.
  function preview() {
    const last = embedder.last;
    if (!last || !dialog.open) return;
    let frame = frameBox.querySelector("iframe");
    if (!frame || frame.dataset.src !== last.src) {
      frame = document.createElement("iframe");
      frame.dataset.src = last.src;
      // A widget that starts when it scrolls into view starts at once here: the author is
      // looking at the dialog, and a frame made inside its scrolled box may never be told that
      // it came into view (the snippet itself keeps its own start)
      frame.src = last.lazy === "view" ? `${last.src}&lazy=none` : last.src;
      frame.title = `Preview: ${TITLE}`;
      frame.allow = "clipboard-write";
      frameBox.replaceChildren(frame);
    }
    frame.width = String(last.width);
    frame.height = String(last.height);
    caption.textContent = `Preview at ${last.width} × ${last.height} pixels, as the iframe shows it in a course page. It loads its own copy of Python, as a reader's browser would.`;
    embedder.preview = frame;
  }

  async function copy(textarea, button) {
    const ok = await copyText(textarea.value);
    flash(button, ok ? "Copied" : "Select it");
    status.textContent = ok ? "Copied." : "Copying is blocked here: select the snippet and copy it.";
    if (!ok) {
      textarea.focus();
      textarea.select();
    }
  }

  form.addEventListener("input", () => update());
  form.addEventListener("change", () => update());
  $("embed-copy-iframe").addEventListener("click", (e) => copy(outIframe, e.currentTarget));
  $("embed-copy-element").addEventListener("click", (e) => copy(outElement, e.currentTarget));
  $("embed-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    clearTimeout(timer);
    choices.panels = chosen(panelBox);
    choices.controls = chosen(controlBox);
    frameBox.replaceChildren(); // the preview's Python goes with it
    panelBox.replaceChildren();
    controlBox.replaceChildren();
    embedder.preview = null;
    ownHeight = false;
    verdict = null; // the workbench may change before the dialog opens again
  });
  opener.addEventListener("click", () => {
    fillChoices();
    dialog.showModal();
    update({ now: true });
  });
  // Each panel of the page has its own "Embed this panel": the dialog opens with that panel alone
  // chosen, where the author is reading (the Share card's button keeps the usual three).
  const panelOpeners = [];
  for (const part of document.querySelectorAll("main [data-panel]")) {
    const heading = part.querySelector(":scope > h2, :scope > h3");
    if (!heading || part.dataset.panel === "share") continue;
    const name = part.dataset.panel;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "embed-panel";
    button.textContent = "Embed this panel";
    button.setAttribute("aria-label", `Embed this panel: ${PANEL_WORDS[name] || heading.textContent.trim()}, alone in a course page`);
    button.disabled = true;
    button.addEventListener("click", () => {
      choices.panels = [name];
      opener.click();
    });
    heading.before(button);
    panelOpeners.push(button);
  }
  hooks.ready.then(() => {
    opener.disabled = false;
    for (const button of panelOpeners) button.disabled = false;
  }, () => {});
  hooks.embedder = embedder;
  return embedder;
}
