// Try this, one click: each suggestion of the lesson has a button that sets the page up and runs
// it, as a learner would (the workbench's form and Generate, or a panel's own controls), and an
// answer written from what that run showed. Every answer also lists its evidence: where on the
// page each thing it claims can be seen, so a test can check that it is there.
//
// A suggestion is {id, where, text, act(page) -> Promise of what it saw, answer(seen) ->
// {text, evidence: [[selector, words], ...]}}; `page` offers run(settings) (apply, Generate, wait
// for the end), apply(settings), kv() (the KV-cache panels, each with its own way to be run),
// serving() (the paging chapter's panel), search() (the beam and draft panels: beam.runWith,
// speculative.runWith), info() (what Python said at start-up), text (the
// generated text) and runs (the runs kept for comparing). A suggestion works the panels through
// what they offer, never through another panel's buttons.
//
// Each chapter's suggestions are in a file of their own (tries/); this module makes their
// buttons, runs them and shows their answers.

import { el } from "../ui/render.js";
import { TRIES as ANSWERS } from "./tries/answers.js";
import { TRIES as CACHE } from "./tries/cache.js";
import { TRIES as ENDS } from "./tries/ends.js";
import { TRIES as PAGING } from "./tries/paging.js";
import { TRIES as SAMPLING } from "./tries/sampling.js";
import { TRIES as SEARCH } from "./tries/search.js";
import { TRIES as START } from "./tries/start.js";
import { TRIES as STOPPING } from "./tries/stopping.js";

const TRIES = [...SAMPLING, ...START, ...ENDS, ...STOPPING, ...ANSWERS, ...CACHE, ...SEARCH, ...PAGING];

export function createTries(app) {
  const lists = {
    lesson: document.getElementById("try-list"),
    sampling: document.getElementById("sampling-try-list"),
    ends: document.getElementById("ends-try-list"),
    tokens: document.getElementById("tokens-try-list"),
    tools: document.getElementById("tools-try-list"),
    kv: document.getElementById("kv-try-list"),
    search: document.getElementById("search-try-list"),
    serving: document.getElementById("serving-try-list"),
  };
  const items = {};
  const results = {};
  let busy = false;

  // One run of the workbench with these settings (on top of the defaults), as the learner would.
  const page = {
    async run(settings) {
      await app.apply(settings);
      const result = await app.generate();
      if (result.status !== "done") throw new Error(`the run did not finish (${result.status})`);
      const trace = app.run();
      return { ...result, steps: trace.steps };
    },
    apply: (settings) => app.apply(settings),
    kv: () => app.kv(),
    serving: () => app.serving(),
    search: () => app.search(),
    info: () => app.info(),
    text: app.text,
    runs: app.runs,
  };

  for (const t of TRIES) {
    const li = el("li", "try-item");
    li.id = `try-${t.id}`;
    const button = el("button", "try-go", "Try it");
    button.type = "button";
    button.disabled = true;
    button.setAttribute("aria-describedby", `try-${t.id}-text`);
    const text = el("p", "try-text", t.text);
    text.id = `try-${t.id}-text`;
    const status = el("p", "try-status");
    status.setAttribute("role", "status");
    const answer = el("details", "try-answer");
    answer.hidden = true;
    answer.append(el("summary", null, "The answer, from your run"), el("p", "try-answer-text"));
    li.append(text, button, status, answer);
    answer.addEventListener("toggle", () => { if (answer.open) bringIntoView(answer); }); // opened: all of it
    lists[t.where].append(li);
    items[t.id] = { li, button, status, answer };
    button.addEventListener("click", () => go(t));
  }

  // A suggestion that runs the workbench takes the learner there (store.trip: the course draws
  // the way back), so the run is seen where it happens; one that works a panel of its own
  // chapter runs where the learner is reading.
  function tripping(t, item) {
    const from = item.li.closest(".chapter[data-chapter]")?.dataset.chapter;
    let away = false;
    const start = () => {
      if (away || !from) return;
      away = true;
      app.store.trip({ id: t.id, from, text: t.text, status: "running" });
      app.store.openChapter("start", { source: "trip" });
    };
    return {
      page: { ...page, run: (settings) => (start(), page.run(settings)) },
      end: (news) => { if (away) app.store.trip({ id: t.id, ...news }); },
      away: () => away,
    };
  }

  async function go(t) {
    if (busy) return;
    busy = true;
    const item = items[t.id];
    for (const i of Object.values(items)) i.button.disabled = true;
    item.status.textContent = "Running…";
    item.answer.hidden = true;
    item.li.dataset.state = "running";
    const trip = tripping(t, item);
    try {
      const seen = await t.act(trip.page);
      const out = t.answer(seen);
      results[t.id] = out;
      item.answer.querySelector(".try-answer-text").textContent = out.text;
      item.answer.hidden = false;
      if (trip.away()) item.status.textContent = "Done: it ran in the workbench (chapter 1), where the run still is. The answer is below.";
      else {
        await drawn(); // the panel's run laid out, then the words and the place of the answer
        for (let i = 0; i < 2; i += 1) { // (the words may take another line: moved again)
          where(item.status, out.evidence);
          bringIntoView(item.li);
        }
      }
      item.li.dataset.state = "done";
      app.store.tried(t.id);
      trip.end({ status: "done", answer: out.text });
    } catch (err) {
      item.status.textContent = `It could not run: ${err.message}`;
      item.li.dataset.state = "error";
      trip.end({ status: "error", message: err.message });
    } finally {
      busy = false;
      for (const i of Object.values(items)) i.button.disabled = false;
    }
  }

  // The answer where the learner is: a panel's run may have grown the page or moved it meanwhile
  // (the bugs lab's verdict, the draft's rounds), leaving the question and its answer at the
  // window's edge or out of it, and an answer opened at the window's foot runs under it; the
  // page moves the least that brings them whole into view.
  // The next frame (or a tenth of a second, where a hidden tab gets none): what a run drew is
  // laid out by then.
  const drawn = () => new Promise((resolve) => {
    requestAnimationFrame(() => resolve());
    setTimeout(resolve, 100);
  });

  function bringIntoView(node) {
    const box = node.getBoundingClientRect();
    if (box.top >= 0 && box.bottom <= window.innerHeight) return;
    node.scrollIntoView({ block: box.height > window.innerHeight ? "start" : "nearest" });
  }

  // Where a panel of this chapter shows the run: said, with a way there when it is out of view
  // (a panel's output can sit a screen or two away from its questions). The words are read at
  // the question, wherever the panel's own run has scrolled the page meanwhile, so "above" and
  // "below" are said from there.
  function where(status, evidence) {
    const shown = (evidence || []).map(([selector]) => document.querySelector(selector)).find((e) => e && e.getClientRects().length);
    const part = shown && shown.closest("[aria-labelledby]");
    const title = part && document.getElementById(part.getAttribute("aria-labelledby"));
    const box = shown && shown.getBoundingClientRect();
    const here = status.getBoundingClientRect();
    const inView = (b) => b.top >= 0 && b.bottom <= window.innerHeight;
    if (!title || (inView(box) && inView(here))) {
      status.textContent = "Done. Look at the page, then open the answer.";
      return;
    }
    const go = el("button", "try-where", `show it in “${title.textContent.trim()}”`);
    go.type = "button";
    go.addEventListener("click", () => shown.scrollIntoView({ block: "center", behavior: "smooth" }));
    status.replaceChildren(`Done. The run is ${box.bottom <= here.top ? "above" : "below"} this question: `, go, ". The answer is under it.");
  }

  return {
    ready() {
      for (const i of Object.values(items)) i.button.disabled = false;
    },
    /** Run one suggestion by its id, as its button does; resolves with its answer. */
    async run(id) {
      await go(TRIES.find((t) => t.id === id));
      return results[id];
    },
    results,
  };
}
