// Accessibility helpers that span the page.
//
// One polite live region for screen readers: it speaks when a run starts, and when it ends it
// reads the generated text and why it stopped, once: never a character at a time while the text
// streams. It also reads the step a learner picks in the text or with the inspector's buttons.
//
// Boxes that scroll sideways (wide tables on a narrow screen) join the tab order while they
// overflow, so they can be scrolled from the keyboard. And the keyboard focus is never dropped
// while a run disables the Generate button. And a control that takes the focus is scrolled clear
// of the sticky run bar, never left underneath it.

import { $ } from "./dom.js";

const LONGEST = 280; // characters of generated text read out; longer texts are cut with a count

export function installA11y({ store, hooks }) {
  installAnnouncer(store, hooks);
  focusableScrollers(store, hooks);
  keepFocusThroughRuns(store);
  clearOfStickyBar();
}

// On a narrow screen the run bar and the text are a band stuck to the top of the viewport. The
// browser scrolls a focused control into view as if the band were not there; telling it the
// band's height as the page's scroll padding keeps the control below the band.
function clearOfStickyBar() {
  const stage = $("stage");
  if (!stage || typeof ResizeObserver === "undefined") return;
  const root = document.documentElement;
  const update = () => {
    const sticky = getComputedStyle(stage).position === "sticky" && stage.offsetWidth > root.clientWidth * 0.8;
    const padding = sticky ? `${Math.ceil(stage.getBoundingClientRect().height) + 8}px` : "";
    if (root.style.scrollPaddingTop !== padding) root.style.scrollPaddingTop = padding; // unchanged: no new style
  };
  new ResizeObserver(update).observe(stage);
  addEventListener("resize", update);
  update();
}

function installAnnouncer(store, hooks) {
  const region = $("announce");
  let timer = 0;
  // Clearing first, then writing a moment later, makes a repeated sentence heard again.
  const say = (text) => {
    if (!region) return;
    clearTimeout(timer);
    region.textContent = "";
    timer = setTimeout(() => {
      region.textContent = text;
    }, 60);
  };
  hooks.announce = say;

  store.subscribe((change) => {
    if (change.type === "asked") say("Generating…");
    else if (change.type === "result") ended(change.result || {});
    else if (change.type === "select") selected();
  });
  function ended(r) {
    const finish = ($("finish-text")?.textContent || "").trim();
    if (r.status === "done") {
      const text = String(r.text || "");
      const chars = [...text];
      const shown = chars.length > LONGEST ? `${chars.slice(0, LONGEST).join("")}… (${chars.length} characters in all)` : text;
      say(text ? `Generated text: ${shown}. ${finish}` : `No new text. ${finish}`);
    } else if (r.status === "invalid") {
      const first = (r.errors || [])[0];
      say(first ? `Nothing generated: ${first.message}` : "Nothing generated: check the settings.");
    } else {
      say(finish || "The run failed.");
    }
  }
  // Only for picks made in the text or with the inspector's own buttons: the step-through
  // player (Play, Step) speaks for itself, and Play must not read out every step it passes.
  function selected() {
    const at = document.activeElement;
    if (!at || !at.closest("#text-gen, #stepper, #end-marker")) return;
    const count = $("step-count")?.textContent || "";
    const summary = $("step-summary")?.textContent || "";
    if (count) say(`${count}. ${summary}`);
  }
}

const SCROLLERS = ".table-wrap, [data-scrolls]";

function updateScroller(box) {
  const overflows = box.scrollWidth > box.clientWidth + 1 && getComputedStyle(box).overflowX !== "visible";
  if (overflows && !box.hasAttribute("tabindex")) {
    box.tabIndex = 0;
    box.dataset.scrollFocus = "true";
    box.setAttribute("role", "region");
    const caption = box.querySelector("caption");
    if (caption && caption.id) box.setAttribute("aria-labelledby", caption.id);
    else box.setAttribute("aria-label", caption ? caption.textContent : "Table, scrolls sideways");
  } else if (!overflows && box.dataset.scrollFocus) {
    for (const name of ["tabindex", "role", "aria-labelledby", "aria-label", "data-scroll-focus"]) box.removeAttribute(name);
  }
}

// Checked after anything that can add or widen a table (start-up, the end of a run, a step
// picked, a click or a change anywhere, a resize), a moment later and once for a burst, and
// right before Tab moves the focus, so the tab order is always up to date. Nothing is checked
// while text streams in, and nothing forces the browser to lay out a long text early.
function focusableScrollers(store, hooks) {
  let timer = 0;
  const check = () => {
    clearTimeout(timer);
    timer = 0;
    document.querySelectorAll(SCROLLERS).forEach(updateScroller);
  };
  const later = () => {
    if (document.documentElement.dataset.state === "generating") soon(); // after the run
    else check();
  };
  // Measured just after a frame is drawn, when the layout is usually already done.
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(() => requestAnimationFrame(() => {
      timer = setTimeout(later, 0);
    }), 150);
  };
  hooks.ready.then(soon, () => {});
  store.subscribe((change) => { if (change.type === "result" || change.type === "select") soon(); });
  for (const type of ["click", "change"]) document.addEventListener(type, soon, true);
  window.addEventListener("resize", soon);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Tab") check();
  }, true);
  hooks.checkScrollers = check;
}

// Generate is disabled while a run goes. A keyboard user who pressed it would be left with the
// focus nowhere, so the focus moves to Stop for the run, and back to Generate when it ends.
function keepFocusThroughRuns(store) {
  const generate = $("generate");
  const stop = $("stop-button");
  let handed = false;
  // Whether Generate had the focus when it was pressed: newer browsers drop the focus of a
  // button as soon as it is disabled, which the run does before it says it has started.
  let pressed = false;
  generate.addEventListener("click", () => {
    pressed = document.activeElement === generate;
  }, true);
  // The same when a run starts without a press (Ctrl+Enter, an embed's first sample after it
  // put the focus on Generate): the focus fell off Generate because the run disabled it.
  let dropped = false;
  generate.addEventListener("focusout", () => { dropped = generate.disabled; });
  document.addEventListener("focusin", () => { dropped = false; }); // the focus went on elsewhere
  store.subscribe((change) => {
    if (change.type === "asked") started();
    else if (change.type === "result") ended();
  });
  function started() {
    const had = pressed || dropped || document.activeElement === generate;
    pressed = dropped = false;
    if (had && !stop.disabled) {
      handed = true;
      stop.focus();
    }
  }
  // Pressing Stop disables it too: the focus goes back to Generate.
  stop.addEventListener("click", () => {
    if (document.activeElement === stop) handed = true;
  }, true);
  function ended() {
    const at = document.activeElement;
    if (handed && (at === stop || at === document.body || at === null)) generate.focus();
    handed = false;
  }
}
