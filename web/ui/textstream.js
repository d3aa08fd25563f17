// Keeps the streamed text cheap to draw, however long a run gets.
//
// Every generated character is its own clickable span (app.js makes them). A browser lays out
// and paints a paragraph of inline elements as a whole, so with thousands of spans every frame
// that touches the text costs time in proportion to its length (about 25 ms for 5,000 spans on
// the 2-core build machine), and a streaming run would keep the page from answering. So while a
// run streams, the older spans are "sealed": set aside and replaced by one plain-text stand-in
// showing exactly the same characters, which costs about as little as plain text. Only the
// newest 60 to 200 characters stay live spans. A stand-in gives its spans back when they are
// needed: a click or a pointer on it (the click then goes to the character under the pointer),
// or one of its steps being selected (the step buttons, the timeline, the keyboard).
//
// The spans themselves are kept (run.spans still maps every step to its span), so everything
// that holds them keeps working; a sealed span is only out of the document for a while.
//
// New spans reach the document about 30 times a second, in one piece, not as each batch of
// steps arrives from the worker: the text looks just as live, and the page draws half as many
// frames while a run streams, which leaves the processor to the worker and to the learner.

const LIVE_MAX = 200; // live spans allowed while streaming before the oldest are sealed
const LIVE_KEEP = 60; // live spans left after sealing
const FLUSH_MS = 30; // new text reaches the document at most this often while streaming

export function createTextStream(container) {
  let run = null;
  let streaming = false;
  let sealed = []; // stand-ins in the document: {node, spans, first, last}
  const byNode = new WeakMap(); // stand-in node -> its record
  let pending = document.createDocumentFragment(); // new spans not in the document yet
  let frame = 0;
  let flushedAt = 0;
  let heldFrom = 0; // the first step with characters still held back (or the next step)

  function reset(r) {
    run = r;
    streaming = true;
    sealed = [];
    pending = document.createDocumentFragment();
  }

  function flush() {
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    flushedAt = performance.now();
    if (pending.firstChild) container.append(pending);
    if (run && streaming) seal(run);
  }

  function schedule() {
    if (frame) return;
    const tick = () => {
      frame = 0;
      if (performance.now() - flushedAt < FLUSH_MS - 4) frame = requestAnimationFrame(tick);
      else flush();
    };
    frame = requestAnimationFrame(tick);
  }

  // Characters still held back (a possible stop string) belong to steps from heldFrom on; their
  // spans may still grow, so they and a margin before them stay live.
  function sealLimit() {
    return heldFrom - 8;
  }

  function seal(r) {
    const live = container.childElementCount - sealed.length;
    if (live <= LIVE_MAX) return;
    const limit = sealLimit();
    const last = sealed.length ? sealed[sealed.length - 1].node : null;
    const spans = [];
    let text = "";
    for (let node = last ? last.nextSibling : container.firstChild; node && spans.length < live - LIVE_KEEP; node = node.nextSibling) {
      const step = Number(node.dataset && node.dataset.step);
      if (!node.classList || !node.classList.contains("tok") || !(step < limit)) break;
      spans.push(node);
      text += node.textContent;
    }
    if (spans.length < 2) return;
    const stand = document.createElement("span");
    stand.className = "tok-sealed";
    stand.append(...withNewlineMarks(text));
    spans[0].before(stand);
    // Take the run of siblings out in one go.
    const range = document.createRange();
    range.setStartBefore(spans[0]);
    range.setEndAfter(spans[spans.length - 1]);
    range.deleteContents();
    const steps = spans.map((span) => Number(span.dataset.step));
    const record = { node: stand, spans, first: Math.min(...steps), last: Math.max(...steps) };
    sealed.push(record);
    byNode.set(stand, record);
  }

  // A newline span shows a ⏎ mark (style.css); the stand-in shows it too.
  function withNewlineMarks(text) {
    const out = [];
    text.split("\n").forEach((part, i) => {
      if (i) {
        const nl = document.createElement("span");
        nl.className = "nl";
        nl.textContent = "\n";
        out.push(nl);
      }
      if (part) out.push(part);
    });
    return out;
  }

  function unseal(record) {
    sealed = sealed.filter((r) => r !== record);
    if (record.node.isConnected) record.node.replaceWith(...record.spans);
  }

  function recordAt(event) {
    const stand = event.target.closest && event.target.closest(".tok-sealed");
    return stand ? byNode.get(stand) : null;
  }

  // A click on sealed text: give the spans back, then pass the click to the character under
  // the pointer, as if it had been there all along.
  container.addEventListener("click", (event) => {
    const record = recordAt(event);
    if (!record) return;
    event.stopPropagation();
    unseal(record);
    const hit = document.elementFromPoint(event.clientX, event.clientY);
    const span = hit && hit.closest(".tok");
    if (span && container.contains(span)) span.click();
  }, true);

  // A pointer resting on sealed text of a finished run: give the spans back so that each
  // character highlights under the pointer as usual.
  container.addEventListener("pointerover", (event) => {
    const record = !streaming && recordAt(event);
    if (record) unseal(record);
  });

  return {
    /** A new character span of the run on screen: it joins the text at the next flush. */
    add(span) {
      pending.append(span);
      schedule();
    },
    /** After new steps were added to the run on screen (a new run starts afresh); from:
     * the first step whose characters may still grow (held back for a possible stop string). */
    update(r, from) {
      heldFrom = from;
      if (r !== run) {
        if (frame) cancelAnimationFrame(frame);
        frame = 0;
        reset(r);
      }
    },
    /** Put every new span into the document now (before the text is read). */
    flush,
    /** The run is over: its text is complete; stand-ins stay until they are needed. */
    finish(r) {
      if (r !== run) return;
      flush();
      streaming = false;
    },
    /** The span of this step is about to be shown as selected or focused: put it back. */
    reveal(r, index) {
      if (r !== run || index == null || !sealed.length) return;
      const record = sealed.find((s) => index >= s.first && index <= s.last);
      if (record) unseal(record);
    },
    /** How many stand-ins are in the document (tests, the benchmark). */
    get sealedCount() {
      return sealed.length;
    },
  };
}
