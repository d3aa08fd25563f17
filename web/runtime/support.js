// What the browser must have for the lesson to run, checked before Python is started, so that an
// old browser is told so in words instead of with a script error. docs/site.md's table of browsers
// gives each feature's first versions (from MDN's compatibility data).
//
// Everything else the page uses degrades: without light-dark() the page keeps its light colours,
// without service workers it works online only, without cross-origin isolation a stuck Python
// call restarts the worker instead of being interrupted.

const NEWER = "Chrome or Edge 111, Firefox 114 or Safari 16.2, or newer";

/** True where `new Worker(url, {type: "module"})` runs a module: the browser reads `type`. */
function moduleWorkers() {
  if (typeof Worker !== "function") return false;
  let read = false;
  try {
    // The options are read before the address is: a bad address ends it without starting a worker.
    new Worker("http://[", { get type() { read = true; return "module"; } });
  } catch {
    // expected: the address cannot be parsed
  }
  return read;
}

/**
 * Why the lesson cannot run here, or null where it can: {problem, remedy}, both in words. The
 * lesson checks its files' SHA-256 with the Web Crypto API, which browsers offer only to pages
 * from a secure address.
 */
export function unsupported() {
  const missing = [];
  if (typeof WebAssembly !== "object" || typeof BigInt64Array !== "function") missing.push("WebAssembly with 64-bit integers");
  if (!moduleWorkers()) missing.push("module workers");
  if (missing.length) {
    return { problem: `This browser cannot run the lesson's Python: it lacks ${missing.join(" and ")}.`, remedy: `Open the page in ${NEWER}.` };
  }
  if (!globalThis.isSecureContext || !globalThis.crypto || !crypto.subtle) {
    return { problem: "The lesson checks its files with the browser's Web Crypto API, which browsers offer only to pages from a secure address.",
      remedy: "Open the page from an https:// address, or from localhost." };
  }
  return null;
}
