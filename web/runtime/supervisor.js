// Runs the Python worker and keeps it alive.
//
// The page talks to the supervisor as it would to the Worker itself (postMessage, and "message"
// and "error" events), while the supervisor watches the worker:
//
//   - a heartbeat: every second it sends {type: "ping"}; the worker answers between batches of
//     work. A ping left unanswered for longer than the limit (a Python call that never returns,
//     a worker that closed itself), and still unanswered one beat later, means the worker has
//     stopped answering;
//   - the worker's "error" event after start-up (an uncaught error that may have killed it), and
//     a {type: "fatal"} message (the worker found Python unusable, for example out of memory).
//
// Where the page is cross-origin isolated (its server sends COOP and COEP headers, as
// `build.py serve` does), the supervisor first tries the gentle way with a worker that stopped
// answering: it shares an interrupt buffer with the worker's Python (Pyodide's
// setInterruptBuffer) and sets it, so the Python call that never returns ends in a
// KeyboardInterrupt. The worker then says so ({type: "interrupted"}, passed on to the page as an
// "interrupted" event), and the request that call served fails with a message; nothing is
// restarted, and Python keeps what it holds (the latest run's trace, the lesson's state).
// Without isolation there is no shared memory, and a hung worker is replaced at once.
//
// Otherwise, or if the worker still does not answer GRACE_MS after the interrupt (a hang outside
// Python), the supervisor terminates the worker, tells the page ("lost": the page gives up the requests in
// flight and says what happened), starts a new one, trains the learner's own text again if they
// had trained one, and tells the page ("restarted"). The page's settings and the text on screen
// are the page's own and are not touched. If restarting keeps failing it stops trying and says
// so ("restart-failed").
//
// Widgets of one site on a course page can share one Python: with `shared`, the worker is a
// SharedWorker that every widget connects to (worker.js keeps each page's state apart). A
// shared worker cannot be terminated by one of its pages, so if it hangs or fails, this page goes
// on with a dedicated worker of its own, started the usual way. Where the browser has no
// SharedWorker, or the page is not a widget, the worker is dedicated from the start.
//
// Fault injection for tests: with ?faults=1 in the page's address, injectFault("hang" | "crash"
// | "fatal") asks the worker to misbehave; the worker honours it only when it was started with
// faults=1 too. ?watchdog=MS (with faults=1 only) shortens the heartbeat limit for tests.

const PING_MS = 1000;
const ANSWER_MS = 30000; // a ready worker answers within this (the longest request, the
// benchmark's full recomputation of 256 tokens, takes about 6 s on a busy 2-core machine)
const BOOT_ANSWER_MS = 60000; // start-up has long stretches without a turn of the event loop
const GRACE_MS = 3000; // after an interrupt, the time the worker gets to answer again
const MAX_RESTARTS = 3; // within RESTART_WINDOW_MS; more means something is broken for good
const RESTART_WINDOW_MS = 120000;

/**
 * ?faults=1 (and, with it, ?watchdog=MS) from the page's address; shared for a widget
 * (?embed=true) where the browser has SharedWorker, unless ?worker=dedicated asks otherwise
 * (?worker=shared asks for it even with faults=1, to test the way back to a dedicated worker).
 */
export function optionsFromAddress(search = location.search) {
  const params = new URLSearchParams(search);
  const faults = params.get("faults") === "1";
  const ms = Number(params.get("watchdog"));
  const embed = ["true", "1", "on", "yes"].includes((params.get("embed") || "").toLowerCase());
  const asked = params.get("worker"); // "dedicated" or "shared" (tests of the fallback: with faults=1)
  const shared = typeof SharedWorker === "function" && asked !== "dedicated" && ((embed && !faults) || asked === "shared");
  return { faults, shared, answerMs: faults && Number.isFinite(ms) && ms >= 500 ? ms : ANSWER_MS };
}

// The page's first dedicated worker can be started early, by prestart.js, as soon as the page's
// first small script runs instead of once app.js and its many modules have loaded (about 0.2 s
// sooner). What it says and any error before the supervisor listens are held, then handed on.
let early = null; // {href, worker, held, hold}

/** Start the worker at scriptUrl now, where the page's supervisor will start that one. */
export function prestart(scriptUrl) {
  const { faults, shared } = optionsFromAddress();
  if (early || faults || shared) return;
  const worker = new Worker(scriptUrl, { type: "module" });
  const held = [];
  const hold = (event) => held.push(event);
  worker.addEventListener("message", hold);
  worker.addEventListener("error", hold);
  early = { href: new URL(scriptUrl).href, worker, held, hold };
}

// The early worker for url, if there is one (once): listening to it hands on what it held.
function adopt(url) {
  const found = early && early.href === url.href ? early : null;
  early = null;
  if (!found) return null;
  // handed on in a task of its own, once the page has set up its own listeners too (what comes
  // meanwhile is held behind the rest, so the order stays)
  const listen = (type, handler) => setTimeout(() => {
    found.worker.removeEventListener(type, found.hold);
    for (const event of found.held) if (event.type === type) handler(event);
    found.worker.addEventListener(type, handler);
  }, 0);
  return { worker: found.worker, listen };
}

// The worker behind one interface, dedicated or shared.
function spawn(url, shared) {
  if (shared) {
    const worker = new SharedWorker(url, { type: "module", name: "decodelab" });
    const port = worker.port;
    const bye = () => port.postMessage({ type: "bye" });
    // a page kept for the back button comes back to its session, so only a page that goes says so
    const leaving = (event) => {
      if (!event.persisted) bye();
    };
    addEventListener("pagehide", leaving);
    return {
      shared: true,
      postMessage: (m) => port.postMessage(m),
      terminate: () => {
        removeEventListener("pagehide", leaving);
        bye();
        port.close();
      },
      onMessage: (handler) => {
        port.addEventListener("message", handler);
        port.start();
      },
      onError: (handler) => worker.addEventListener("error", handler),
    };
  }
  const adopted = adopt(url);
  const worker = adopted ? adopted.worker : new Worker(url, { type: "module" });
  const listen = adopted ? adopted.listen : (type, handler) => worker.addEventListener(type, handler);
  return {
    shared: false,
    postMessage: (m) => worker.postMessage(m),
    terminate: () => worker.terminate(),
    onMessage: (handler) => listen("message", handler),
    onError: (handler) => listen("error", handler),
  };
}

export function createSupervisor(scriptUrl, { faults = false, shared = false, answerMs = ANSWER_MS } = optionsFromAddress()) {
  const events = new EventTarget();
  const url = new URL(scriptUrl);
  if (faults) url.searchParams.set("faults", "1");

  let worker = null;
  let booted = false; // the current worker has said "ready"
  let everReady = false; // some worker has been ready (the page has started)
  let recovering = null; // {reason, since} while a new worker is starting
  let waitingPing = null; // {n, at} the ping not answered yet
  let pings = 0;
  let trained = null; // the text the learner trained on, to train again after a restart
  const trainsInFlight = new Map(); // request id -> text
  let replayId = null;
  const restarts = []; // times of recent restarts
  const stats = { restarts: 0, interrupts: 0, last: null, violations: [] }; // violations: inside the worker
  // One byte shared with the worker's Python: 2 (SIGINT) asks it to stop the call it is in.
  const interrupt = globalThis.crossOriginIsolated ? new Uint8Array(new SharedArrayBuffer(1)) : null;

  function emit(type, detail) {
    events.dispatchEvent(new CustomEvent(type, { detail }));
  }

  function forward(data) {
    events.dispatchEvent(new MessageEvent("message", { data }));
  }

  function start() {
    booted = false;
    waitingPing = null;
    try {
      worker = spawn(url, shared);
    } catch (err) {
      if (!shared) throw err;
      shared = false; // this browser refuses a shared worker here: one of our own, then
      worker = spawn(url, false);
    }
    const me = worker;
    if (interrupt && !worker.shared) {
      Atomics.store(interrupt, 0, 0);
      worker.postMessage({ type: "interrupt-buffer", buffer: interrupt });
    }
    worker.onMessage((event) => {
      if (me === worker) onMessage(event.data || {});
    });
    worker.onError((event) => {
      if (me !== worker) return;
      event.preventDefault();
      if (worker.shared && !booted) {
        // A browser that keeps a widget's storage apart from its course page's (third-party
        // storage blocked) may refuse a shared worker: this widget starts its own instead.
        worker.terminate();
        shared = false;
        start();
        return;
      }
      if (!everReady) {
        // The first start-up failed: the page shows it as a boot error; nothing to restart.
        events.dispatchEvent(new ErrorEvent("error", { message: event.message }));
        return;
      }
      lost("crash", event.message || "the background worker stopped with an error");
    });
  }

  function onMessage(m) {
    if (m.type === "interrupted") {
      // the interrupt worked: the stuck Python call ended, and the worker answers again
      const since = waitingPing ? waitingPing.at : performance.now();
      stats.interrupts += 1;
      stats.last = { reason: "hang", message: "interrupted", at: Math.round(performance.now()) };
      emit("interrupted", { reason: "hang", ms: Math.round(performance.now() - since) });
    }
    waitingPing = null; // any message means the worker is alive
    if (m.type === "interrupted") return;
    if (m.type === "pong") return;
    if (m.type === "csp-violation") {
      stats.violations.push(m);
      return;
    }
    if (m.type === "fatal") {
      lost("fatal", m.message || "Python stopped working");
      return;
    }
    if (m.type === "ready") booted = true;
    // A restart after the page was ready is quiet; one during the first start-up is not (the
    // page is still showing the start-up, so it sees the new worker's progress as usual).
    if (recovering && everReady) return onRecoveryMessage(m);
    if (m.type === "ready") {
      everReady = true;
      recovering = null;
    }
    if (trainsInFlight.has(m.id) && (m.type === "reply" || m.type === "error")) {
      if (m.type === "reply" && m.result && m.result.ok) trained = trainsInFlight.get(m.id);
      trainsInFlight.delete(m.id);
    }
    forward(m);
  }

  // While a new worker starts, its start-up news is the supervisor's business, not the page's.
  function onRecoveryMessage(m) {
    if (m.type === "boot-error") {
      giveUp(`Python could not be started again: ${m.message}`);
    } else if (m.type === "ready") {
      if (trained != null) {
        replayId = `replay-${Date.now()}`;
        worker.postMessage({ type: "call", id: replayId, endpoint: "train", request: { text: trained } });
      } else {
        finishRecovery(m.info);
      }
    } else if (replayId != null && m.id === replayId) {
      replayId = null;
      const ok = m.type === "reply" && m.result && m.result.ok;
      if (!ok) trained = null; // cannot happen for text that trained before
      finishRecovery(null, ok ? m.result.dataset : null);
    }
  }

  function finishRecovery(info, dataset = null) {
    const { reason, since } = recovering;
    recovering = null;
    everReady = true;
    emit("restarted", { reason, ms: Math.round(performance.now() - since), info, dataset });
  }

  function giveUp(message) {
    const reason = recovering ? recovering.reason : "crash";
    recovering = null;
    if (worker) worker.terminate();
    worker = null;
    emit("restart-failed", { reason, message });
  }

  function lost(reason, message) {
    if (!worker || (recovering && !booted)) {
      // already starting a new one: a second failure during start-up counts as a failed restart
      if (recovering) giveUp(`Python stopped again while starting (${message}).`);
      return;
    }
    worker.terminate();
    worker = null;
    shared = false; // a shared worker that failed stays with its other pages; this one goes alone
    trainsInFlight.clear();
    replayId = null;
    stats.restarts += 1;
    stats.last = { reason, message, at: Math.round(performance.now()) };
    const now = performance.now();
    restarts.push(now);
    while (restarts.length && now - restarts[0] > RESTART_WINDOW_MS) restarts.shift();
    emit("lost", { reason, message });
    if (restarts.length > MAX_RESTARTS) {
      emit("restart-failed", { reason, message: `The background worker failed ${restarts.length} times in a row, so it was not started again. Reload the page to try again.` });
      return;
    }
    recovering = { reason, since: now };
    start();
  }

  function heartbeat() {
    if (!worker) return;
    const now = performance.now();
    const limit = booted ? answerMs : Math.max(answerMs, BOOT_ANSWER_MS);
    if (waitingPing) {
      const waited = now - waitingPing.at;
      if (waited <= limit) return;
      if (interrupt && booted && !worker.shared && !waitingPing.interruptedAt) {
        waitingPing.interruptedAt = now; // the gentle way first: end the stuck Python call
        Atomics.store(interrupt, 0, 2);
        return;
      }
      if (waitingPing.interruptedAt && now - waitingPing.interruptedAt <= Math.min(GRACE_MS, limit)) return;
      // Overdue. Decide on the next beat, not this one: when the page itself was held up (a busy
      // machine), this beat may run before the worker's answer that already waits in the queue.
      if (!waitingPing.overdue) {
        waitingPing.overdue = true;
        return;
      }
      lost("hang", `no answer for ${Math.round(waited / 1000)} s`);
      return;
    }
    waitingPing = { n: ++pings, at: now };
    worker.postMessage({ type: "ping", n: pings });
  }

  start();
  setInterval(heartbeat, Math.min(PING_MS, Math.max(100, answerMs / 4)));

  return {
    addEventListener: (...args) => events.addEventListener(...args),
    removeEventListener: (...args) => events.removeEventListener(...args),
    postMessage(message) {
      if (!worker) return; // given up: the page already said so
      if (message && message.type === "call" && message.endpoint === "train") {
        trainsInFlight.set(message.id, String((message.request && message.request.text) ?? ""));
      }
      worker.postMessage(message);
    },
    /** Tests only (?faults=1): make the worker hang, crash, or fail as Python would. */
    injectFault(kind) {
      if (!faults) throw new Error("fault injection needs ?faults=1 in the address");
      if (worker) worker.postMessage({ type: "fault", kind });
    },
    get recovering() {
      return Boolean(recovering);
    },
    /** True where the page is cross-origin isolated: a stuck Python call can be interrupted. */
    get interruptible() {
      return Boolean(interrupt) && !(worker && worker.shared);
    },
    /** True while this page's Python is a worker shared with the site's other widgets. */
    get shared() {
      return Boolean(worker && worker.shared);
    },
    faults,
    stats,
  };
}
