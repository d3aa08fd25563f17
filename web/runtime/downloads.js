// Download progress in bytes: on a slow connection the Python runtime takes seconds to arrive,
// and a bar that does not move looks frozen. `readBody` is the one loop that reads a download's
// bytes as they arrive, for the start's count below and for the real model's file (modelfile.js);
// `every` spaces its reports.
//
// Each big file's bytes are counted from a copy of its response (Response.clone), so the
// response Pyodide reads, and compiles as it streams, is left as it is. The total is the size of
// the runtime files a start fetches (the build marks them `startup` in pyodide/integrity.json:
// Pyodide, numpy and the decodelab wheel, less the wheels a return has installed already), so
// "6.1 of 16.9 MiB" is known from the first byte;
// the lesson files' bytes (assets/manifest.json) join it when their phase begins.
const EVERY_MS = 100; // at most this often a new figure

/** `say` at most every `ms` milliseconds; `say.now(...)` calls it at once. */
export function every(ms, say) {
  let last = -Infinity;
  const spaced = (...args) => {
    const now = performance.now();
    if (now - last < ms) return;
    last = now;
    say(...args);
  };
  spaced.now = (...args) => {
    last = performance.now();
    say(...args);
  };
  return spaced;
}

/**
 * Each piece of `response`'s body, in order, handed to `take(chunk, got)` (got: the bytes read
 * with it); the number of bytes read. A read that fails, or a `take` that throws, ends it with
 * that error.
 */
export async function readBody(response, take) {
  const reader = response.body.getReader();
  let got = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return got;
    got += value.byteLength;
    take(value, got);
  }
}

/** onChange({got, total, done}) is called at most every EVERY_MS while bytes arrive, and when a file ends. */
export function createDownloads(onChange) {
  let got = 0;
  let total = 0;
  let open = 0; // responses still arriving
  let startup = null; // the paths a start fetches, once the list is read
  let sizes = new Map(); // path -> bytes, from the list
  const skipped = new Set(); // startup paths this start does not fetch after all

  const tell = every(EVERY_MS, () => onChange({ got, total, done: open === 0 && got >= total }));

  async function count(response) {
    if (!response.body) return;
    open += 1;
    try {
      await readBody(response, (chunk) => {
        got += chunk.byteLength;
        tell();
      });
    } catch {
      // the original response reports its own failure; the count just stops
    } finally {
      open -= 1;
      tell.now();
    }
  }

  return {
    /** The build's list of runtime files ({path, bytes}): the total a start fetches. */
    expect(list) {
      sizes = new Map(list.map((f) => [f.path, f.bytes]));
      startup = new Set(list.filter((f) => f.startup).map((f) => f.path));
      total = list.filter((f) => startup.has(f.path)).reduce((sum, f) => sum + (Number(f.bytes) || 0), 0);
    },
    /** For integrity.js: a checked runtime file's response, as it arrives. */
    watch(file, response) {
      if (!startup || startup.has(file.path)) count(response.clone());
    },
    /** Files of the list this start will not fetch after all: they leave the total. */
    skip(paths) {
      for (const path of paths) {
        if (!startup || !startup.delete(path)) continue;
        skipped.add(path);
        total -= Number(sizes.get(path)) || 0;
      }
    },
    /** The skipped files will be fetched after all: they come back into the total. */
    unskip() {
      for (const path of skipped) {
        startup.add(path);
        total += Number(sizes.get(path)) || 0;
      }
      skipped.clear();
    },
    /** The lesson files come after the runtime: their bytes join the total, and the count. */
    expectMore(bytes) {
      total += bytes;
    },
    watchMore(response) {
      count(response.clone());
    },
  };
}
