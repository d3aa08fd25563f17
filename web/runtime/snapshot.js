// What the runtime's snapshot (kept.js's "runtime-snapshot") holds, and how to tell a snapshot
// from other bytes.
//
// Pyodide 0.27 can copy Python's memory only before any package with compiled modules is loaded,
// so the copy is made right after the runtime is up. Before it is made, the start imports the
// pure-Python and built-in standard-library modules that numpy, the package and Pyodide's own
// package loader import later anyway (SNAPSHOT_MODULES). A return then restores them already
// imported instead of importing them again: importlib.metadata alone, which Python imports the
// first time the import caches are refreshed after a package is installed, took about 0.2 s of
// a start in a browser, 0.4 s on a first reload.
//
// ctypes is left out on purpose: its import makes a C callback (ctypes/__init__.py does so
// once), and libffi's callbacks here are WebAssembly functions added to the runtime's function
// table, which the copy does not hold.

export const SNAPSHOT_MODULES = [
  "__future__", "base64", "calendar", "csv", "dataclasses", "datetime", "email.message",
  "email.utils", "encodings.cp437", "hashlib", "hmac", "importlib.metadata", "json", "numbers",
  "pickle", "platform", "secrets", "shlex", "tarfile",
];
// Standard-library modules the start may import after the copy (see above).
const LEFT_OUT = ["ctypes", "_ctypes"];

/** Import SNAPSHOT_MODULES (one this Python lacks is skipped) and note what the copy holds. */
export function prepareForSnapshot(pyodide) {
  pyodide.runPython(`
import importlib, sys
for _name in ${JSON.stringify(SNAPSHOT_MODULES)}:
    try:
        importlib.import_module(_name)
    except ImportError:
        pass
_snapshot_modules = frozenset(sys.modules)
`);
}

/**
 * The standard-library modules imported since the snapshot was made (or restored) that it could
 * have held, sorted; [] where Python did not start from a snapshot. A return that has to import
 * any of them again is slower than it needs to be: they belong in SNAPSHOT_MODULES.
 */
export function importedSinceSnapshot(pyodide) {
  const found = pyodide.runPython(`
import sys
_left_out = ${JSON.stringify(LEFT_OUT)}
sorted(m for m in set(sys.modules) - globals().get("_snapshot_modules", set(sys.modules))
       if m.split(".")[0] in sys.stdlib_module_names and m.split(".")[0] not in _left_out)
`);
  try {
    return found.toJs();
  } finally {
    found.destroy();
  }
}

// Pyodide 0.27's snapshot: a 48-byte head (a magic number, then where the memory starts), JSON,
// then the WebAssembly memory, whole 64 KiB pages. (Pyodide sizes its memory from the length
// before it reads the head, so anything else must not reach it.)
const SNAPSHOT_MAGIC = 1886286592;

/** Whether `bytes` (a Uint8Array) has the shape of a Pyodide 0.27 snapshot. */
export function looksLikeSnapshot(bytes) {
  if (bytes.byteLength < 48) return false;
  const head = new DataView(bytes.buffer, bytes.byteOffset, 48);
  const memoryAt = head.getUint32(4, true);
  return head.getUint32(0, true) === SNAPSHOT_MAGIC && memoryAt >= 48 && memoryAt < bytes.byteLength
    && (bytes.byteLength - memoryAt) % 65536 === 0;
}
