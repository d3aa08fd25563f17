// Every file of the Python runtime is checked against the SHA-256 recorded when the site was
// built (pyodide/integrity.json, written by build.py), before any of it runs.
//
// The files Pyodide downloads with fetch (the WebAssembly binary, the standard library, the
// lock file, the wheels) get the browser's own Subresource Integrity check: every fetch of a
// listed file carries its `integrity` value, so the browser refuses bytes that do not match,
// and the bytes that are checked are the very bytes that run. The two JavaScript files are
// loaded with import(), which cannot carry an integrity value, so they are fetched with it
// first, and then imported (from the HTTP cache).
//
// A mismatch stops the start-up with a message that names the file.

const LIST = "integrity.json";
const JS_FILES = ["pyodide.mjs", "pyodide.asm.js"];

const problems = [];
let reject = null;
// Settles (rejects) at the first problem. Pyodide's loader does not always give up when its
// WebAssembly binary is refused, so the start-up races its loading against this.
const failed = new Promise((_, no) => {
  reject = no;
});
failed.catch(() => {}); // nobody may be waiting when it happens

/** The SHA-256 of some bytes, as 64 hex digits. */
export async function sha256Hex(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The first problem found, in words, or null. */
export function runtimeProblem() {
  return problems.length ? problems[0] : null;
}

async function describeFailure(plainFetch, url, path, err) {
  // Was the file there at all? Ask again without the check, bypassing the cache.
  try {
    const response = await plainFetch(url, { cache: "no-store" });
    if (!response.ok) return `The Python runtime file pyodide/${path} could not be downloaded (HTTP ${response.status}).`;
    const bytes = (await response.arrayBuffer()).byteLength;
    return `The Python runtime file pyodide/${path} failed its integrity check: its SHA-256 checksum does not match the one recorded when the site was built (${bytes} bytes received). The file is damaged or was changed; rebuild or re-copy the site.`;
  } catch {
    return `The Python runtime file pyodide/${path} could not be downloaded: ${(err && err.message) || err}.`;
  }
}

/**
 * Read the list and put the checks in place; then check the JavaScript files. Throws with a
 * message naming the file when one fails. Returns {files, list, ms, failed}: `list` is the
 * list's entries ({path, bytes, ...}), `failed` rejects at the first file that fails later on.
 * onFetched(entry, response), if given, sees each listed file's response as it arrives (it
 * must not read that response's body: Pyodide does).
 */
export async function guardRuntime(dirUrl, onFetched = null) {
  const t0 = performance.now();
  const plainFetch = self.fetch.bind(self);
  let list;
  try {
    const response = await plainFetch(new URL(LIST, dirUrl), { cache: "no-cache" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    list = await response.json();
  } catch (err) {
    throw new Error(`The list of runtime checksums (pyodide/${LIST}) could not be read: ${err.message || err}.`);
  }
  const files = Array.isArray(list.files) ? list.files : [];
  const byUrl = new Map();
  for (const file of files) {
    if (typeof file.path !== "string" || typeof file.integrity !== "string" || !/^sha(256|384|512)-[A-Za-z0-9+/=]+$/.test(file.integrity)) {
      throw new Error(`The list of runtime checksums (pyodide/${LIST}) has an unreadable entry.`);
    }
    byUrl.set(new URL(file.path, dirUrl).href, file);
  }
  for (const name of [...JS_FILES, "pyodide.asm.wasm", "python_stdlib.zip"]) {
    if (!byUrl.has(new URL(name, dirUrl).href)) {
      throw new Error(`The list of runtime checksums (pyodide/${LIST}) does not list ${name}.`);
    }
  }

  self.fetch = async (input, init = {}) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url, self.location.href);
    url.hash = "";
    const file = byUrl.get(url.href);
    if (!file) return plainFetch(input, init);
    try {
      const response = await plainFetch(url.href, { ...init, integrity: file.integrity });
      if (onFetched) onFetched(file, response);
      return response;
    } catch (err) {
      const message = await describeFailure(plainFetch, url.href, file.path, err);
      problems.push(message);
      reject(new Error(message));
      throw new Error(message);
    }
  };

  await Promise.all(JS_FILES.map(async (name) => {
    const response = await self.fetch(new URL(name, dirUrl).href);
    await response.arrayBuffer();
  }));
  return { files: files.length, list: files, ms: Math.round(performance.now() - t0), failed };
}
