// Step through a run: Step, Play, Pause, Reset and a speed, over a timeline of the run's steps
// (one bar per chosen token, the prefill step apart from the decode steps), at the top of the
// step view. Selecting a step here selects it everywhere (the text, the step view and its rules),
// through the page's own select(). Bars of steps a stop string cut from the text are marked. While replaying, what comes after the current step is held back in the timeline
// and dimmed in the text, so the run reads as if it were being written again.

import { el, fixed, pct, plural, readable, spoken, stepOdds } from "../ui/render.js";
import { $ } from "../ui/dom.js";

const MAX_BARS = 2000; // the timeline draws at most this many steps
const CHUNK = 64; // decode bars per group: off-screen groups skip layout and paint (style.css)
const TABLE_NOW = 200; // longer tables are built when their box is opened
// Each bar is one step; in greedy mode the odds are the model's own (stepOdds says why).
const MEASURES = {
  prob: { label: "probability", unit: "", value: (o) => o.p, scale: () => 1 },
  surprisal: { label: "surprisal", unit: "nats", value: (o) => surprisal(o.p) },
  entropy: { label: "entropy", unit: "nats", value: (o) => o.entropy },
};

/** −ln p: how surprising the chosen token was (0 for a certain choice). */
export function surprisal(p) {
  return p > 0 ? -Math.log(p) : Infinity;
}

export function createStepper(app) {
  const { select } = app;
  const dom = {
    card: $("stepthrough"),
    empty: $("st-empty"),
    body: $("st-body"),
    reset: $("st-reset"),
    step: $("st-step"),
    play: $("st-play"),
    pause: $("st-pause"),
    speed: $("st-speed"),
    measure: $("st-measure"),
    position: $("st-position"),
    say: $("st-say"),
    prefill: $("st-prefill"),
    decode: $("st-decode"),
    scaleTop: $("st-scale-top"),
    tableBody: $("st-rows"),
    tableNote: $("st-table-note"),
    more: $("st-more"),
  };
  let run = null;
  let drawn = 0; // steps with a bar so far
  let bars = []; // step index -> its button
  let timer = null;
  let replaying = false; // steps after the selected one are held back
  let dimming = false; // some bars or text are dimmed right now
  let lastSelected = null;

  const controls = [dom.reset, dom.step, dom.play, dom.speed, dom.measure];

  function enable(on) {
    for (const c of controls) c.disabled = !on;
    dom.pause.disabled = !timer;
  }

  // --- the timeline --------------------------------------------------------------------------

  function measure() {
    return MEASURES[dom.measure.value] || MEASURES.prob;
  }

  function scaleMax() {
    const m = measure();
    if (m.scale) return m.scale();
    let max = 0;
    for (const s of run.steps.slice(0, MAX_BARS)) {
      if (s.source === "tool") continue;
      const v = m.value(odds(s));
      if (Number.isFinite(v)) max = Math.max(max, v);
    }
    return max > 0 ? max : 1;
  }

  function odds(step) {
    return stepOdds(step, run.greedy);
  }

  function barLabel(step, index) {
    if (step.source === "tool") return `Step ${index + 1}, appended by the tool: ${spoken(step.token_text)}`;
    const where = step.phase === "prefill" ? "prefill" : "decode";
    return `Step ${index + 1}, ${where}: ${spoken(step.token_text)}, ${pct(odds(step).p)}`;
  }

  function addBars() {
    const upto = Math.min(run.steps.length, MAX_BARS);
    if (drawn >= upto) return;
    const frag = { prefill: [], decode: [] };
    for (let i = drawn; i < upto; i++) {
      const step = run.steps[i];
      const button = el("button", `st-bar ${step.phase}`);
      button.type = "button";
      button.tabIndex = -1;
      button.dataset.step = String(i);
      button.setAttribute("aria-label", barLabel(step, i));
      button.setAttribute("aria-pressed", "false");
      const track = el("span", "st-track");
      track.append(el("span", "st-fill"));
      // a special token (<|call|>) is named by what is inside its brackets, in small letters
      const special = /^<\|(.+)\|>$/.exec(step.token_text);
      const label = special ? special[1] : readable(step.token_text);
      // a BPE token can be a whole word: it is clipped to its bar (the bar's name says all of it)
      const long = step.token_text !== "<eos>" && [...step.token_text].length > 1;
      button.append(track, el("span", special ? "st-tok st-tok-long st-tok-special" : long ? "st-tok st-tok-long" : "st-tok", label));
      if (step.source === "tool") button.classList.add("st-tool");
      bars[i] = button;
      (step.phase === "prefill" ? frag.prefill : frag.decode).push(button);
    }
    dom.prefill.append(...frag.prefill);
    for (let at = 0; at < frag.decode.length;) {
      let group = dom.decode.lastElementChild;
      if (!group || group.childElementCount >= CHUNK) dom.decode.append(group = el("span", "st-chunk"));
      const room = CHUNK - group.childElementCount;
      group.append(...frag.decode.slice(at, at + room));
      at += room;
    }
    const from = drawn;
    drawn = upto;
    dom.more.hidden = run.steps.length <= MAX_BARS;
    dom.more.textContent = `The timeline shows the first ${MAX_BARS} of ${run.steps.length} steps.`;
    paintHeights(measure() === MEASURES.prob ? from : 0); // a fixed scale: only the new bars
  }

  function paintHeights(from = 0) {
    const m = measure();
    const max = scaleMax();
    dom.scaleTop.textContent = m === MEASURES.prob ? "100%" : `${fixed(max, 2)} ${m.unit}`;
    for (let i = from; i < drawn; i++) {
      const step = run.steps[i];
      const v = m.value(odds(step));
      // a token the tool appended has no odds: its bar stays empty (drawn as a frame)
      const h = step.source === "tool" ? 0 : Number.isFinite(v) ? Math.max(0, Math.min(1, v / max)) : 1;
      bars[i].firstChild.firstChild.style.setProperty("--h", `${h * 100}%`);
    }
  }

  function paintSelection() {
    const sel = run.selected;
    if (lastSelected != null && bars[lastSelected]) {
      bars[lastSelected].classList.remove("is-selected");
      bars[lastSelected].setAttribute("aria-pressed", "false");
      bars[lastSelected].tabIndex = -1;
    }
    const bar = sel != null ? bars[sel] : null;
    if (bar) {
      bar.classList.add("is-selected");
      bar.setAttribute("aria-pressed", "true");
      bar.tabIndex = 0;
      keepInView(bar);
    } else if (bars[0]) {
      bars[0].tabIndex = 0;
    }
    lastSelected = bar ? sel : null;
    // held back while replaying: bars and text after the selected step
    if (!replaying && !dimming) return;
    for (let i = 0; i < drawn; i++) bars[i].classList.toggle("is-future", replaying && sel != null && i > sel);
    for (const [i, span] of app.text.spans()) span.classList.toggle("st-future", replaying && sel != null && i > sel);
    dimming = replaying;
  }

  // The selected bar is kept in view by watching it against the timeline's scroll box: the
  // browser reports it after the frame's own layout, so a streaming run (the selection moves with
  // every batch of steps) never makes it lay the page out once more to measure. A bar not wholly
  // in view is measured then, with the page's layout already done (a bar in a group that was off
  // screen, which skips its layout, has its group laid out: 64 bars). Only the first report after
  // each selection is acted on (then the bar is let go), so a learner who scrolls the timeline
  // away is not pulled back.
  let watched = null;
  let follow = null;
  function keepInView(bar) {
    const box = bar.closest(".st-scroll");
    if (!box) return;
    if (!follow || follow.root !== box) {
      if (follow) follow.disconnect();
      follow = new IntersectionObserver(scrollToBar, { root: box, rootMargin: "0px -8px", threshold: 1 });
    }
    if (watched && watched !== bar) follow.unobserve(watched);
    follow.observe(watched = bar);
  }

  function scrollToBar(entries) {
    for (const entry of entries) follow.unobserve(entry.target);
    const entry = entries.findLast((e) => e.target === watched);
    if (!entry) return;
    watched = null;
    const bar = entry.target;
    const box = follow.root;
    if (entry.intersectionRatio >= 1 || !bar.isConnected) return;
    const left = bar.getBoundingClientRect().left - box.getBoundingClientRect().left + box.scrollLeft; // bars sit in groups
    if (left < box.scrollLeft + 8 || left + bar.offsetWidth > box.scrollLeft + box.clientWidth - 8) {
      box.scrollLeft = Math.max(0, left - box.clientWidth / 2);
    }
  }

  // --- where the replay is (the step itself is described once, by the step view) ----------------

  function showPosition() {
    const i = run.selected;
    dom.position.textContent = i != null && run.steps[i] ? `Step ${i + 1} of ${run.steps.length}` : "";
  }

  // Steps whose characters a stop string cut from the text, or that are held back for one.
  function markUnshown() {
    for (let i = 0; i < drawn; i++) {
      const unshown = !run.shown[i] && run.steps[i].token_text !== "<eos>";
      bars[i].classList.toggle("is-cut", unshown && run.done && Boolean(run.finish && run.finish.cut.length));
      bars[i].classList.toggle("is-held", unshown && !run.done);
    }
  }

  // Thousands of rows cost a long layout: a long run's table is built when its box is opened.
  const tableBox = dom.tableBody.closest("details");
  if (tableBox) {
    tableBox.addEventListener("toggle", () => {
      if (tableBox.open && run && run.done && !dom.tableBody.childElementCount) fillTable();
    });
  }

  function fillTable() {
    if (run.steps.length > TABLE_NOW && tableBox && !tableBox.open) {
      dom.tableBody.replaceChildren();
      return;
    }
    const rows = [];
    const upto = Math.min(run.steps.length, MAX_BARS);
    for (let i = 0; i < upto; i++) {
      const step = run.steps[i];
      const tr = el("tr");
      const th = el("th", null, String(i + 1));
      th.scope = "row";
      if (step.source === "tool") {
        tr.append(th, el("td", null, "tool"), el("td", "st-mono", readable(step.token_text)),
          el("td", null, "–"), el("td", null, "–"), el("td", null, "–"));
        rows.push(tr);
        continue;
      }
      const o = odds(step);
      const s = surprisal(o.p);
      tr.append(th, el("td", null, step.phase), el("td", "st-mono", readable(step.token_text)),
        el("td", null, pct(o.p)), el("td", null, Number.isFinite(s) ? fixed(s, 3) : "∞"),
        el("td", null, fixed(o.entropy, 3)));
      rows.push(tr);
    }
    dom.tableBody.replaceChildren(...rows);
    dom.tableNote.textContent = run.steps.length > upto ? `The first ${upto} of ${run.steps.length} steps.` : "";
  }

  // --- playback --------------------------------------------------------------------------------

  function go(index, { announce = false } = {}) {
    if (!run || !run.done || index < 0 || index >= run.steps.length) return;
    select(index);
    if (index === run.steps.length - 1 && replaying && !timer) replaying = false;
    paintSelection();
    if (announce) dom.say.textContent = `Step ${index + 1} of ${run.steps.length}: ${spoken(run.steps[index].token_text)}, ${pct(odds(run.steps[index]).p)}.`;
  }

  function delay() {
    return 1000 / (Number(dom.speed.value) || 2);
  }

  function tick() {
    const next = (run.selected ?? -1) + 1;
    if (next >= run.steps.length) {
      pause(`Played to the end: ${plural(run.steps.length, "step", "steps")}.`);
      return;
    }
    go(next);
    timer = setTimeout(tick, delay());
  }

  function play() {
    if (!run || !run.done || timer) return;
    replaying = true;
    if (run.selected == null || run.selected >= run.steps.length - 1) go(0);
    dom.say.textContent = `Playing from step ${run.selected + 1}.`;
    timer = setTimeout(tick, delay());
    dom.card.dataset.playing = "true";
    dom.play.disabled = true;
    dom.pause.disabled = false;
    dom.pause.focus();
  }

  function pause(message) {
    const wasFocused = document.activeElement === dom.pause;
    if (timer) clearTimeout(timer);
    timer = null;
    delete dom.card.dataset.playing;
    dom.pause.disabled = true;
    dom.play.disabled = !(run && run.done);
    if (run && run.selected === run.steps.length - 1) {
      replaying = false;
      paintSelection();
    }
    if (run && run.selected != null) dom.say.textContent = message || `Paused at step ${run.selected + 1} of ${run.steps.length}.`;
    if (wasFocused) dom.play.focus();
  }

  dom.step.addEventListener("click", () => {
    if (!run) return;
    if (timer) pause();
    if (run.selected == null || run.selected >= run.steps.length - 1) {
      replaying = true;
      go(0, { announce: true });
    } else {
      replaying = true;
      go(run.selected + 1, { announce: true });
    }
  });
  dom.reset.addEventListener("click", () => {
    if (!run) return;
    if (timer) pause();
    replaying = true;
    go(0, { announce: true });
  });
  dom.play.addEventListener("click", play);
  dom.pause.addEventListener("click", () => pause());
  dom.measure.addEventListener("change", () => run && paintHeights());

  dom.card.addEventListener("click", (event) => {
    const bar = event.target.closest(".st-bar");
    if (!bar || !run) return;
    if (timer) pause();
    go(Number(bar.dataset.step), { announce: true });
    bars[Number(bar.dataset.step)].focus();
  });

  dom.card.addEventListener("keydown", (event) => {
    const bar = event.target.closest(".st-bar");
    if (!bar || !run) return;
    const at = Number(bar.dataset.step);
    let target = null;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") target = Math.min(at + 1, drawn - 1);
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") target = Math.max(at - 1, 0);
    else if (event.key === "Home") target = 0;
    else if (event.key === "End") target = drawn - 1;
    if (target == null) return;
    event.preventDefault();
    if (timer) pause();
    go(target, { announce: true });
    bars[target].focus();
  });

  return {
    /** Is the replay playing (a step is due)? Paused, nothing moves until Play. */
    get playing() {
      return Boolean(timer);
    },
    ready() {
      dom.empty.textContent = "Generate some text, then replay it here one step at a time.";
    },
    runStarted(r) {
      if (timer) pause();
      for (const span of app.text.spans().values()) span.classList.remove("st-future");
      run = r;
      drawn = 0;
      bars = [];
      lastSelected = null;
      replaying = false;
      dimming = false;
      dom.prefill.replaceChildren();
      dom.decode.replaceChildren();
      dom.tableBody.replaceChildren();
      dom.say.textContent = "";
      dom.empty.hidden = false;
      dom.empty.textContent = "Generating… the steps appear here as they are chosen.";
      dom.body.hidden = true;
      dom.card.dataset.state = "generating";
      enable(false);
    },
    selected(r) {
      if (!r || r !== run) return;
      addBars();
      if (drawn) {
        dom.empty.hidden = true;
        dom.body.hidden = false;
      }
      paintSelection();
      showPosition();
    },
    runDone(r) {
      if (r !== run) return;
      addBars();
      paintHeights();
      fillTable();
      dom.empty.hidden = drawn > 0;
      dom.body.hidden = drawn === 0;
      if (!drawn) dom.empty.textContent = "This run has no steps to replay.";
      dom.card.dataset.state = "ready";
      enable(drawn > 0);
      paintSelection();
      showPosition();
      markUnshown();
    },
  };
}
