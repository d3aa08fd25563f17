// The lesson as a course: one chapter on screen at a time, each at its own address
// (index.html#sampling, or the id of anything in it: #kvcache opens the KV-cache chapter there),
// a map of every chapter that says where the learner is and what they have done, the chapters
// before and after at each chapter's end, and the trip a Try this makes to the workbench and
// back. The chapters are the <section class="chapter"> elements of index.html, in order: their
// names, titles and summaries are read from there, so a chapter is added by writing one.
//
// Which chapter is open, which were seen and which suggestions were tried are the store's
// (store.openChapter, store.tried, store.trip); this module draws them, follows the address, and
// keeps the progress in the browser for the next visit. An embedded widget has no chapters: it
// shows the panels its host chose (embed/embed.js), so none of this is installed there.

import { $, el } from "../ui/dom.js";
import { chapterProgress, neighbours, readKept, resolveHash } from "./progress.js";

const KEPT = "decodelab-course";

export function installCourse(page) {
  const { store } = page;
  const chapters = [...document.querySelectorAll("#main > .chapter[data-chapter]")];
  const map = $("course-map");
  if (!chapters.length || !map) return null;
  if (document.documentElement.dataset.embed) {
    map.hidden = true;
    return null;
  }
  document.documentElement.dataset.course = "on";
  // words that point up at the workbench ("the settings above") are true in a widget, where the
  // panels follow one another; in a course the workbench is a chapter of its own
  for (const node of document.querySelectorAll("[data-in-course]")) node.textContent = node.dataset.inCourse;
  const names = chapters.map((c) => c.dataset.chapter);
  const pageTitle = document.title; // the page's own; the chapter follows it
  const byName = Object.fromEntries(chapters.map((c) => [c.dataset.chapter, c]));
  const titles = Object.fromEntries(chapters.map((c) => [c.dataset.chapter, c.getAttribute("aria-label")]));
  const title = (name) => titles[name];
  const number = (name) => names.indexOf(name) + 1;
  const triesOf = Object.fromEntries(chapters.map((c) => [c.dataset.chapter,
    [...c.querySelectorAll(".try-item")].map((li) => li.id.replace(/^try-/, ""))]));
  const allTries = Object.values(triesOf).flat();
  const chapterOf = (id) => {
    const node = document.getElementById(id);
    return node && node.closest(".chapter[data-chapter]")?.dataset.chapter;
  };

  // --- the map, each chapter's head and its way on ---------------------------------------------

  const links = {};
  const marks = {};
  for (const name of names) {
    const a = el("a", "course-link");
    a.href = `#${name}`;
    marks[name] = el("span", "course-progress");
    a.append(el("span", "course-no", String(number(name))), el("span", "course-title", title(name)), marks[name]);
    links[name] = a;
    const li = el("li", "course-item");
    li.append(a);
    $("course-list").append(li);
  }
  for (const chapter of chapters) {
    const name = chapter.dataset.chapter;
    const head = el("header", "chapter-head");
    const heading = el("h2", "chapter-title", title(name));
    heading.id = `${name}-chapter-title`;
    heading.tabIndex = -1; // focus lands here when a chapter is opened from the keyboard
    head.append(el("p", "chapter-kicker", `Chapter ${number(name)} of ${names.length}`), heading);
    if (chapter.dataset.summary) head.append(el("p", "chapter-summary", chapter.dataset.summary));
    chapter.removeAttribute("aria-label");
    chapter.setAttribute("aria-labelledby", heading.id);
    chapter.prepend(head);

    const { prev, next } = neighbours(names, name);
    const foot = el("nav", "chapter-foot");
    foot.setAttribute("aria-label", "Chapters before and after this one");
    for (const [other, rel, words] of [[prev, "prev", "Previous"], [next, "next", "Next"]]) {
      if (!other) continue;
      const a = el("a", `chapter-${rel}`);
      a.href = `#${other}`;
      a.rel = rel;
      a.append(el("span", "chapter-way", words), el("span", "chapter-to", `${number(other)}. ${title(other)}`));
      foot.append(a);
    }
    chapter.append(foot);
  }

  // Which arithmetic the real model's numbers come from, under the summary of each chapter
  // whose panels can run it: the engine it is loaded on (its card reads it for the other).
  const engineLines = chapters.filter((c) => c.hasAttribute("data-runs-real")).map((c) => {
    const line = el("p", "chapter-engine");
    line.hidden = true;
    c.querySelector(".chapter-head").append(line);
    return line;
  });
  function drawEngine() {
    const { loaded, info } = store.state.pretrained;
    for (const line of engineLines) {
      line.hidden = !(loaded && info);
      if (!line.hidden) line.textContent = `${info.name || "The real model"} is loaded on ${info.engine_phrase}: wherever this chapter runs it, its numbers come from that arithmetic. Its card in chapter 1 reads it for the other engine, and the cache chapter’s last panel sets the two side by side.`;
    }
  }

  // --- drawing what the store says ---------------------------------------------------------------

  function drawMap() {
    const { chapter, tried, seen } = store.state.course;
    for (const name of names) {
      const p = chapterProgress(triesOf[name], tried, seen.includes(name));
      links[name].dataset.mark = p.mark;
      marks[name].textContent = p.words;
      if (name === chapter) links[name].setAttribute("aria-current", "page");
      else links[name].removeAttribute("aria-current");
    }
    // the open chapter's entry in view on a narrow screen, where the map scrolls sideways
    const item = links[chapter]?.parentElement;
    const list = $("course-list");
    if (item && list.scrollWidth > list.clientWidth) {
      list.scrollLeft = item.offsetLeft - (list.clientWidth - item.offsetWidth) / 2;
    }
  }

  function show({ chapter, target, source }) {
    for (const c of chapters) c.hidden = c.dataset.chapter !== chapter;
    document.title = `${pageTitle} · ${title(chapter)}`;
    drawMap();
    // the address follows the chapter (a trip and its return are steps the Back button retraces)
    const want = `#${target || chapter}`;
    if (source !== "address" && source !== "load" && location.hash !== want) {
      history.pushState(history.state, "", want);
    }
    if (source === "load" && !location.hash) return; // a first visit starts at the top
    // a trip shows its note with the run beside it; a chapter opens at the map, which says where
    // in the course it is
    const to = source === "trip" ? $("trip") : target ? $(target) : map;
    if (!to) return;
    for (let folded = to.closest("details:not([open])"); folded; folded = folded.parentElement.closest("details:not([open])")) {
      folded.open = true; // a control behind "More rules", say
    }
    // a control or a suggestion in the middle of the window, a section from its heading
    to.scrollIntoView({ block: to.matches("input, select, textarea, li") ? "center" : "start", behavior: "auto" });
    if (target && to.matches("input, select, textarea")) return to.focus({ preventScroll: true });
    if (source === "map" || source === "address") $(`${chapter}-chapter-title`).focus({ preventScroll: true });
    if (source === "back" && target) {
      const button = $(target)?.querySelector("button");
      if (button) button.focus({ preventScroll: true });
    }
  }

  function drawTrip(trip) {
    const box = $("trip");
    box.hidden = !trip;
    if (!trip) return;
    $("trip-title").textContent = `Try this, from chapter ${number(trip.from)}: ${title(trip.from)}`;
    $("trip-text").textContent = trip.text;
    $("trip-status").textContent = trip.status === "running" ? "Running it here, in the workbench…"
      : trip.status === "done" ? "Done. The run is below; open the answer when you have looked."
        : `It could not run: ${trip.message}`;
    $("trip-answer").hidden = trip.status !== "done";
    if (trip.status === "running") $("trip-answer").open = false; // each answer is opened anew
    $("trip-answer-text").textContent = trip.answer || "";
    $("trip-back").textContent = trip.from === "start" ? "Back to the list" : `Back to ${title(trip.from)}`;
  }

  $("trip-back").addEventListener("click", () => {
    const trip = store.state.course.trip;
    if (trip) store.openChapter(trip.from, { target: `try-${trip.id}`, source: "back" });
  });

  function keep() {
    const { seen, tried } = store.state.course;
    try {
      localStorage.setItem(KEPT, JSON.stringify({ seen, tried }));
    } catch {
      // storage may be off (a private window, a sandboxed frame): progress lasts for this visit
    }
  }

  store.subscribe((change) => {
    if (change.type === "chapter") {
      show(change);
      drawTrip(store.state.course.trip);
      keep();
    } else if (change.type === "progress") {
      drawMap();
      keep();
    } else if (change.type === "trip") {
      drawTrip(change.trip);
    } else if (change.type === "pretrained") {
      drawEngine();
    }
  });

  // --- the address, and the last visit -----------------------------------------------------------

  let kept = "";
  try {
    kept = localStorage.getItem(KEPT) || "";
  } catch {
    kept = "";
  }
  if (kept) store.restoreProgress(readKept(kept, names, allTries));
  const open = (source) => {
    const { chapter, target } = resolveHash(location.hash, names, chapterOf);
    store.openChapter(chapter, { target, source });
  };
  window.addEventListener("hashchange", () => open("address"));
  open("load");

  return {
    names,
    title,
    tries: triesOf,
    /** The chapter that holds an element (its name), or null. */
    chapterOf: (node) => node.closest(".chapter[data-chapter]")?.dataset.chapter || null,
  };
}
