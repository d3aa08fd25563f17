// The real model's card, under the model list while the real model is chosen: what loading it
// costs, Load and Stop, the load's progress and its words, what it is, then the model's shape,
// and at its foot Forget the kept copy.
// It draws the store's state.pretrained and asks the load (load.js) for everything it does.
//
// Panels that ask for the real model in a form of their own (right answers against
// temperature, serving) carry a Load of their own, [data-load-real]: a button and a line that
// follows this card's words while a load goes on. The same load, for a chapter or a widget
// where this card is not on screen.

import { $ } from "../ui/dom.js";
import { bytes } from "../ui/bytes.js";
import { realModel } from "../state/settings.js";

const SHORT_MEMORY_GIB = 4; // navigator.deviceMemory (in GiB) under this: the page warns before loading

/** What the loaded model is, in one line of the page's words. */
export function facts(info) {
  return (info.name ? `${info.name}: ` : "") + [
    `${Math.round(info.params / 1e6)} million parameters`,
    `${info.n_layer} layers`,
    `${info.n_head} query heads sharing ${info.n_kv_head} key-value heads of ${info.head_dim}`,
    `${info.vocab_size.toLocaleString("en")} tokens`,
    `${info.context_size.toLocaleString("en")} positions kept (trained on ${Number(info.trained_context).toLocaleString("en")})`,
    `its KV cache takes ${bytes(info.bytes_per_token)} a token (float32)`,
    ...(info.engine_label ? [`engine: ${info.engine_label}, its weights ${bytes(info.weight_bytes)} in memory`] : []),
  ].join(" · ") + ".";
}

// The engine choice: one radio per engine Python offers, its words beside it; the chosen one
// is the store's (state.pretrained.engine), and choosing another reads the model again for it.
function drawEngines(node, about, chosen, disabled, choose) {
  if (!node.childElementCount) {
    for (const { id, label, words } of about.choices) {
      const row = document.createElement("label");
      row.className = "pretrained-engine-choice";
      const radio = document.createElement("input");
      radio.type = "radio";
      radio.name = "pretrained-engine";
      radio.value = id;
      radio.addEventListener("change", () => { if (radio.checked) choose(id); });
      const name = document.createElement("strong");
      name.textContent = label;
      const text = document.createElement("span");
      text.textContent = ` ${words}`;
      row.append(radio, name, text);
      node.append(row);
    }
  }
  for (const radio of node.querySelectorAll("input")) {
    radio.checked = radio.value === chosen;
    radio.disabled = disabled;
  }
}

export function createCard(store, load) {
  const dom = {
    card: $("pretrained"),
    load: $("pretrained-load"),
    stop: $("pretrained-stop"),
    bar: $("pretrained-bar"),
    status: $("pretrained-status"),
    facts: $("pretrained-facts"),
    memory: $("pretrained-memory"),
    forget: $("pretrained-forget"),
    invite: $("pretrained-invite"),
    cost: $("pretrained-cost"),
    engine: $("pretrained-engine"),
    engines: $("pretrained-engines"),
    kernels: $("pretrained-kernels"),
    lede: $("real-invite"),
    ledeName: $("real-name"),
    choose: $("real-choose"),
  };
  const mirrors = [...document.querySelectorAll("[data-load-real]")].map((node) => {
    const line = node.querySelector("[data-load-status]");
    return { node, button: node.querySelector("button"), line, idle: line.textContent };
  });

  function place(chosen) {
    if (!chosen) return;
    // a widget whose link fixes the model (its control not shown, its group locked) still
    // needs the card, to load the model on the learner's request: it stands before the group
    const group = dom.card.closest(".group");
    if (group && group.dataset.locked) group.before(dom.card);
    // and a widget without its controls panel has it before the first part it shows
    if (dom.card.closest("[data-panel-off]")) { // (its own chat, a panel of its own, goes with it)
      const shown = [...document.querySelectorAll("#main [data-panel]:not([data-panel-off])")].find((n) => !dom.card.contains(n));
      if (shown) shown.before(dom.card);
    }
  }

  function draw() {
    const state = store.state;
    const real = realModel(state.info);
    const chosen = Boolean(real) && state.raw.model === real.id;
    dom.card.hidden = !chosen;
    place(chosen);
    // the first screen says a real model is one click away, and what it costs (Python's words)
    if (dom.lede) dom.lede.hidden = !real || state.pretrained.loaded;
    if (real) {
      dom.cost.textContent = real.cost;
      if (dom.lede) dom.ledeName.textContent = real.title;
    }
    const { loaded, info, loading, said, bar, kept } = state.pretrained;
    const busy = Boolean(loading);
    const down = state.phase === "loading" || state.phase === "error";
    dom.status.textContent = said.text;
    dom.status.classList.toggle("error", said.failed);
    for (const m of mirrors) {
      m.node.hidden = loaded;
      m.button.disabled = busy || down;
      m.line.textContent = busy || said.failed ? said.text : m.idle;
      m.line.classList.toggle("failed", said.failed);
    }
    dom.invite.hidden = loaded || busy;
    dom.load.hidden = loaded || busy;
    dom.load.disabled = down;
    if (said.retry) dom.load.textContent = "Try again";
    dom.stop.hidden = !busy;
    dom.bar.hidden = !busy;
    if (bar === "busy") dom.bar.removeAttribute("value"); // indeterminate
    else if (typeof bar === "number") dom.bar.value = bar;
    const engines = state.info && state.info.pretrained && state.info.pretrained.engines;
    dom.engine.hidden = !engines;
    if (engines) {
      drawEngines(dom.engines, engines, state.pretrained.engine, busy || down, (id) => load.choose(id));
      dom.kernels.textContent = engines.kernels;
    }
    dom.facts.hidden = !loaded;
    if (loaded && info) dom.facts.textContent = facts(info);
    dom.forget.hidden = !kept || busy;
    dom.forget.parentElement.hidden = dom.forget.hidden; // (its row, at the card's foot)
  }

  // The device says it has little memory: said before anything is downloaded.
  const memory = typeof navigator !== "undefined" ? navigator.deviceMemory : undefined;
  if (typeof memory === "number" && memory < SHORT_MEMORY_GIB) {
    dom.memory.hidden = false;
    dom.memory.textContent = `This device says it has about ${memory} GiB of memory; the model needs 0.25 to 0.6 GiB of it (by engine), so loading may fail here. The trained models work either way.`;
  }

  // the load's progress where the learner looks: the card's bar in view when its Load is pressed
  dom.load.addEventListener("click", () => {
    load.load();
    requestAnimationFrame(bringIntoView); // (pressed from the keyboard, it may be out of view)
  });
  if (dom.choose) { // the masthead's invitation: the real model chosen, its card in view
    dom.choose.addEventListener("click", () => {
      const real = realModel(store.state.info);
      if (!real) return;
      store.edit("model", real.id, { commit: true, source: "apply" });
      requestAnimationFrame(() => dom.card.scrollIntoView({ block: "start" }));
    });
  }
  for (const m of mirrors) m.button.addEventListener("click", () => load.load());
  dom.stop.addEventListener("click", () => load.stop());
  dom.forget.addEventListener("click", () => load.forget());

  // Chosen in the Model list, the card's Load and the line where its progress shows come into
  // view (at 1280 x 800 they fell below the fold, under the list)
  const actions = dom.load.closest(".pretrained-actions"); // Load, Stop and the bar
  function bringIntoView() {
    if (dom.card.hidden) return;
    const top = actions.getBoundingClientRect().top;
    // the row and the status line under it (empty, it takes no room: a line's worth allowed)
    const bottom = Math.max(actions.getBoundingClientRect().bottom, dom.status.getBoundingClientRect().bottom) + 24;
    if (top >= 0 && bottom <= window.innerHeight) return;
    const calm = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    window.scrollBy({ top: top < 0 ? top - 16 : bottom - window.innerHeight, behavior: calm ? "auto" : "smooth" });
  }

  store.subscribe((change) => {
    if (["info", "settings", "phase", "pretrained"].includes(change.type)) draw();
    const real = realModel(store.state.info);
    if (change.type === "settings" && change.source === "form" && change.commit && real
        && change.names.includes("model") && store.state.raw.model === real.id && !store.state.pretrained.loaded) {
      requestAnimationFrame(bringIntoView);
    }
  });
  draw();
}
