// The page's side of the Python worker: the worker, watched and restarted by the supervisor
// (supervisor.js), and the two ways to ask it something. The main thread never runs Python.
//
//   request(message)          a message that gets one reply: a Promise of that reply (its id
//                             from id(), when the page must name it later, as Stop does)
//   call(endpoint, request)   one endpoint of decodelab.entry.webapi: a Promise of its answer,
//                             {ok: true, ...} or {ok: false, errors: [{field, label, message}]}
//   stoppable(endpoint, request)  the same call with its own id: {reply, stop()}; stop() gives a
//                             long call up between two of its slices, and its reply is then
//                             {ok: false, stopped: true, errors} (runtime/worker.js, follow)
//
// Messages that are not replies (start-up progress, a run's batches, the worker's health) go to
// the handlers given to on(type, handler). When the worker is lost, every request in flight is
// given up with the reason, in words.

import { createSupervisor } from "./supervisor.js";

export const TROUBLE = {
  hang: "The Python worker stopped answering, so it was stopped.",
  crash: "The Python worker crashed.",
  fatal: "Python failed and could not go on (for example, it ran out of memory).",
};

export function createClient(scriptUrl) {
  const worker = createSupervisor(scriptUrl);
  const replies = new Map(); // request id -> {resolve, reject}
  const handlers = new Map(); // message type -> handler
  let nextId = 1;

  worker.addEventListener("message", (event) => {
    const m = event.data;
    if (m.type === "error" && replies.has(m.id)) { // a request's own failure
      replies.get(m.id).reject(new Error(m.message));
      replies.delete(m.id);
      return;
    }
    const handler = handlers.get(m.type);
    if (handler) return handler(m);
    const reply = replies.get(m.id);
    if (reply) {
      replies.delete(m.id);
      reply.resolve(m);
    }
  });

  worker.addEventListener("lost", (event) => {
    const what = TROUBLE[event.detail.reason] || TROUBLE.crash;
    for (const reply of replies.values()) reply.reject(new Error(what));
    replies.clear();
  });

  function request(message) {
    const id = message.id ?? nextId++; // a message may carry an id of its own (to stop it by)
    return new Promise((resolve, reject) => {
      replies.set(id, { resolve, reject });
      worker.postMessage({ ...message, id });
    });
  }

  return {
    worker,
    /** A new id for a message that is answered by handlers (a run). */
    id: () => nextId++,
    post: (message) => worker.postMessage(message),
    request,
    call: (endpoint, body = {}) => request({ type: "call", endpoint, request: body }).then((m) => m.result),
    stoppable(endpoint, body = {}) {
      const id = nextId++;
      const reply = request({ type: "call", id, endpoint, request: body }).then((m) => m.result);
      return { reply, stop: () => worker.postMessage({ type: "stop", id }) };
    },
    /** Messages of this type go to handler(message) (a handler may look at m.id itself). */
    on(type, handler) {
      handlers.set(type, handler);
    },
    /** Is a reply to this id still awaited (an "error" for it is the request's)? */
    waiting: (id) => replies.has(id),
    /** The supervisor's events: lost, restarted, interrupted, restart-failed, error. */
    listen: (type, handler) => worker.addEventListener(type, handler),
  };
}
