// The worker's side of staying healthy (supervisor.js is the page's side): it answers the
// heartbeat, tells a fatal Python error from an ordinary one, reports how much memory Python
// holds, and, only when started with ?faults=1, breaks on purpose so tests can show recovery.

// A Content-Security-Policy violation inside the worker is reported to the page (tests check
// that there are none); the page's own violations are events on its document.
// (A shared worker has no one page to tell; its pages' own checks stand.)
self.addEventListener("securitypolicyviolation", (event) => {
  if (typeof self.postMessage !== "function") return;
  self.postMessage({ type: "csp-violation", directive: event.effectiveDirective, blocked: String(event.blockedURI || "") });
});

// The worker's own address carries the switch (supervisor.js adds it for ?faults=1 pages).
const FAULTS = new URL(self.location.href).searchParams.get("faults") === "1";

let interruptBuffer = null; // shared with the page where it is cross-origin isolated (supervisor.js)

/**
 * Messages that are not requests: the heartbeat and injected faults. They skip the request
 * queue. Returns true when the message was one of them.
 */
export function controlMessage(message, { post, pyodide }) {
  if (message.type === "ping") {
    post({ type: "pong", n: message.n });
    return true;
  }
  if (message.type === "interrupt-buffer") {
    interruptBuffer = message.buffer;
    if (pyodide()) pyodide().setInterruptBuffer(interruptBuffer);
    return true;
  }
  if (message.type !== "fault") return false;
  if (!FAULTS) {
    post({ type: "error", id: message.id, message: "Fault injection is off (it needs ?faults=1)." });
    return true;
  }
  const py = pyodide();
  if (message.kind === "hang") {
    // Python that never returns: the worker answers nothing until the page interrupts it
    // (where it can) or replaces the worker.
    if (py) {
      try {
        py.runPython("while True:\n    pass\n");
      } catch (err) {
        if (!isInterrupt(err)) throw err;
        post({ type: "interrupted" });
        post({ type: "error", id: message.id, message: INTERRUPTED });
      }
      return true;
    }
    for (;;) { /* no Python yet: hang in JavaScript instead */ }
  }
  if (message.kind === "crash") {
    // An uncaught error reaches the page as the worker's "error" event; then the worker is gone.
    setTimeout(() => {
      throw new Error("decodelab test fault: the worker crashed on purpose");
    });
    setTimeout(() => self.close(), 20);
    return true;
  }
  if (message.kind === "fatal" && py) {
    // The path Pyodide takes after an unrecoverable error (for example out of memory): it marks
    // Python unusable and calls the handler that watchFatal installed.
    try {
      py._api.fatal_error(new Error("decodelab test fault: Python failed on purpose"));
    } catch {
      // fatal_error reports the error and throws it again
    }
    return true;
  }
  post({ type: "error", id: message.id, message: `Unknown fault ${JSON.stringify(message.kind)}: use hang, crash or fatal.` });
  return true;
}

/** Once Python has started: let the page interrupt it, if it sent a buffer for that. */
export function useInterruptBuffer(pyodide) {
  if (interruptBuffer) pyodide.setInterruptBuffer(interruptBuffer);
}

/** Before each request: forget an interrupt that came after the call it was meant for ended. */
export function clearInterrupt() {
  if (interruptBuffer) Atomics.store(interruptBuffer, 0, 0);
}

export const INTERRUPTED = "Python stopped answering, so the call it was stuck in was interrupted. Everything else is kept; you can go on.";

/** True for the KeyboardInterrupt that the page's interrupt buffer raises in Python. */
export function isInterrupt(err) {
  return Boolean(err) && (err.type === "KeyboardInterrupt" || /\bKeyboardInterrupt\b/.test(String(err.message || "").split("\n").slice(-2).join(" ")));
}

/**
 * Pyodide calls its fatal-error handler when Python can no longer run (for example when the
 * WebAssembly memory is exhausted); tell the page at once, and end this worker.
 */
export function watchFatal(pyodide, post) {
  if (!pyodide._api) return;
  pyodide._api.on_fatal = (err) => {
    post({ type: "fatal", message: String((err && err.message) || err || "Python failed") });
    self.close();
  };
}

/** True for errors after which Python cannot be used again (Pyodide marks them). */
export function isFatal(err) {
  if (!err) return false;
  if (err.pyodide_fatal_error) return true;
  return /fatally failed|can no longer be used/.test(String(err.message || err));
}

const REPORT = `
import gc, json
gc.collect()
json.dumps({"python_objects": len(gc.get_objects())})
`;

/**
 * How much memory the worker holds: the WebAssembly memory (it only grows), and Python's own
 * count of live objects after a collection, which would keep growing if Python objects leaked
 * (for example proxies held from JavaScript and never destroyed).
 */
export function memoryReport(pyodide) {
  const py = JSON.parse(pyodide.runPython(REPORT));
  const heap = pyodide._module && pyodide._module.HEAP8;
  return { wasm_bytes: heap ? heap.length : null, ...py };
}
