// <decodelab-embed>: the decodelab widget for a course page that allows scripts.
//
//   <script type="module" src="https://your.site/decodelab/element.js"></script>
//   <decodelab-embed dataset="names" prompt="ma" seed="3" temperature="0.8"></decodelab-embed>
//
// A standalone module with no imports: it wraps an iframe of embed.html from the site this file
// was loaded from (or from the `src` attribute), passes its attributes on as the widget's link
// parameters, fits the iframe to the widget's height, and speaks the widget's postMessage API
// for the page, only with the widget's origin.
//
// Attributes: any setting by name (top-p or top_p, max-new-tokens, ...; stop: one per line),
// panels, theme (light | dark | auto), lazy (view | click | none), run (true: generate once
// started); src (the widget's folder or its embed.html), height (pixels, or auto: the default,
// which follows the content), label (the iframe's accessible name).
// Methods: apply(settings, {generate}) -> Promise of the "applied" reply; generate() -> Promise
// of the "finished" (or "error") message; getGrade(), getState(), setState(state) for the quiz.
// Property: ready (a Promise of the "ready" message).
// Events on the element: decodelab-ready, decodelab-started, decodelab-finished,
// decodelab-applied, decodelab-error, decodelab-height, decodelab-answered, decodelab-grade,
// decodelab-state (event.detail is the message).

const NAMESPACE = "decodelab";
const VERSION = 1;
const OWN = new Set(["src", "height", "label", "id", "class", "style", "title", "lang", "dir", "hidden", "slot", "tabindex"]);
const DEFAULT_LABEL = "decodelab: watch a language model pick text, one character at a time";
const START_HEIGHT = 560;

function widgetPage(src) {
  const base = new URL(src || "./", src ? document.baseURI : import.meta.url);
  if (!/\.html?$/.test(base.pathname)) base.pathname = base.pathname.replace(/\/?$/, "/embed.html");
  return base;
}

class DecodelabEmbed extends HTMLElement {
  #frame = null;
  #origin = null;
  #live = false; // the widget (not the poster) has said ready
  #heard = false; // a page from the widget's site has spoken (so it can be spoken to)
  #wantStart = false; // start the poster as soon as it can hear us
  #queue = []; // messages for the widget, kept until it is ready
  #waiters = []; // {types, resolve}
  #onMessage = (event) => this.#receive(event);

  constructor() {
    super();
    this.ready = new Promise((resolve) => this.#waiters.push({ types: ["ready"], resolve }));
  }

  connectedCallback() {
    if (this.#frame) return;
    if (getComputedStyle(this).display === "inline") this.style.display = "block";
    let url;
    try {
      url = widgetPage(this.getAttribute("src"));
    } catch {
      this.textContent = `decodelab: the src attribute is not a usable address: ${this.getAttribute("src")}`;
      return;
    }
    for (const { name, value } of this.attributes) {
      if (OWN.has(name) || name.startsWith("aria-") || name.startsWith("data-")) continue;
      const key = name.replaceAll("-", "_");
      if (key === "stop") for (const line of value.split(/\r?\n/)) url.searchParams.append(key, line);
      else url.searchParams.set(key, value);
    }
    url.searchParams.set("host", location.origin);
    this.#origin = url.origin;

    const frame = document.createElement("iframe");
    frame.src = url.href;
    frame.title = this.getAttribute("label") || DEFAULT_LABEL;
    frame.loading = "lazy";
    frame.allow = "clipboard-write";
    frame.style.display = "block";
    frame.style.width = "100%";
    frame.style.border = "0";
    frame.style.height = `${this.#fixedHeight() || START_HEIGHT}px`;
    this.#frame = frame;
    window.addEventListener("message", this.#onMessage);
    this.append(frame);
  }

  disconnectedCallback() {
    window.removeEventListener("message", this.#onMessage);
    this.#frame?.remove();
    this.#frame = null;
    this.#live = false;
    this.#heard = false;
  }

  /** Send settings (checked by the widget); resolves with its "applied" reply. */
  apply(settings, { generate = false } = {}) {
    const reply = this.#next(["applied"]);
    this.#send({ type: "settings", settings, generate: Boolean(generate) });
    return reply;
  }

  /** Generate with the current settings; resolves with the "finished" or "error" message. */
  generate() {
    const done = this.#next(["finished", "error"]);
    this.#send({ type: "generate" });
    return done;
  }

  /** The quiz's answers as they stand, marked; resolves with the "grade" reply ({grade}). */
  getGrade() {
    const reply = this.#next(["grade"]);
    this.#send({ type: "get-grade" });
    return reply;
  }

  /** The quiz's answers, to save; resolves with the "state" reply ({state, errors}). */
  getState() {
    const reply = this.#next(["state"]);
    this.#send({ type: "get-state" });
    return reply;
  }

  /** Put saved answers back; resolves with the "state" reply (errors name what was refused). */
  setState(state) {
    const reply = this.#next(["state"]);
    this.#send({ type: "set-state", state });
    return reply;
  }

  get frame() {
    return this.#frame;
  }

  #fixedHeight() {
    const h = Number(this.getAttribute("height"));
    return Number.isFinite(h) && h >= 80 ? Math.min(h, 10000) : 0;
  }

  #next(types) {
    return new Promise((resolve) => this.#waiters.push({ types, resolve }));
  }

  #send(message) {
    const full = { [NAMESPACE]: VERSION, ...message };
    if (this.#live) this.#post(full);
    else {
      this.#queue.push(full);
      // A request to generate, or for the quiz, starts a widget that is still waiting as a poster.
      if (message.type === "generate" || message.generate || message.type.endsWith("-state") || message.type === "get-grade") this.#start();
    }
  }

  #start() {
    if (this.#heard) this.#post({ [NAMESPACE]: VERSION, type: "start" });
    else this.#wantStart = true;
  }

  #post(message) {
    const target = this.#frame && this.#frame.contentWindow;
    if (target) target.postMessage(message, this.#origin);
  }

  #receive(event) {
    const m = event.data;
    if (!this.#frame || event.source !== this.#frame.contentWindow || event.origin !== this.#origin) return;
    if (!m || typeof m !== "object" || m[NAMESPACE] !== VERSION || typeof m.type !== "string") return;
    this.#heard = true;
    if (this.#wantStart && !this.#live) {
      this.#wantStart = false;
      this.#post({ [NAMESPACE]: VERSION, type: "start" });
    }
    if (m.type === "height" && !this.#fixedHeight() && Number.isFinite(m.height)) {
      this.#frame.style.height = `${Math.min(Math.max(Math.ceil(m.height), 80), 10000)}px`;
    }
    if (m.type === "ready") {
      this.#live = true;
      for (const queued of this.#queue.splice(0)) this.#post(queued);
    }
    // one reply answers one request: the first still waiting for its kind
    const i = this.#waiters.findIndex((w) => w.types.includes(m.type));
    if (i >= 0) this.#waiters.splice(i, 1)[0].resolve(m);
    this.dispatchEvent(new CustomEvent(`decodelab-${m.type}`, { detail: m }));
  }
}

if (!customElements.get("decodelab-embed")) customElements.define("decodelab-embed", DecodelabEmbed);

export { DecodelabEmbed };
