// Python's replies about a run, as the worker passes them to the page: whole, with only the
// message's type and the run's id added, so a field Python adds reaches the store as Python
// named it, with no edit here or in state/run.js. Pure: no worker, no Python.

/** The start of a run (webapi start): its settings as completed, the prompt's tokens, ... */
export function started(id, reply) {
  return { ...reply, type: "started", id };
}

/** Settings Python refused: its errors, each naming its field. */
export function invalid(id, reply) {
  return { ...reply, type: "invalid", id };
}

/** A batch of the run (webapi advance or cancel): its steps, what the page draws next, the
 * live check's verdicts and, in the last one ("done"), how the run ended. */
export function batch(id, reply) {
  return { ...reply, type: reply.done ? "done" : "steps", id };
}
