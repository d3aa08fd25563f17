// numpy's and the decodelab package's modules as bytecode, kept for the next start (kept.js
// keeps the bytes).
//
// Pyodide's numpy wheel holds source files only, and every start unpacks it into a new, empty
// file system, so Python would compile some 80 numpy modules and 26 of the package's on every
// start (about 0.3 s of a start in a browser). Instead, Python writes each module's bytecode as
// it imports it, under BYTECODE_DIR (sys.pycache_prefix); the start packs what it wrote, and the
// next start unpacks that before importing anything, so Python compiles nothing.
//
// Python takes a .pyc when its source has the size and modification time the .pyc records. An
// unpacked source's time is the moment of unpacking, so every start sets the package's sources
// to one fixed time (SOURCE_TIME) before importing. That is safe because the pack is keyed by
// the integrity values of the runtime and of both wheels: it is only ever used with the very
// sources it was compiled from.
//
// A pack is one Uint8Array: a 4-byte little-endian length, a JSON list of [path, bytes], then
// the files one after another.

// Below an existing folder: Python's writer makes the missing folders of a path one by one, and a
// missing folder right under the root goes wrong (it is made relative to the working folder).
export const BYTECODE_DIR = "/tmp/bytecode";
const SOURCE_TIME = 946684800; // 2000-01-01, in seconds: any fixed time will do

/** From now on, Python writes and reads bytecode under BYTECODE_DIR. */
export function useBytecodeDir(pyodide) {
  pyodide.runPython(`import sys; sys.pycache_prefix = ${JSON.stringify(BYTECODE_DIR)}; sys.dont_write_bytecode = False`);
}

/** Give every source file of the installed (not yet imported) package `name` the fixed time. */
export function settleSources(pyodide, name) {
  pyodide.runPython(`
import importlib.util, os
for _folder in importlib.util.find_spec(${JSON.stringify(name)}).submodule_search_locations:
    for _dir, _, _files in os.walk(_folder):
        for _file in _files:
            if _file.endswith(".py"):
                os.utime(os.path.join(_dir, _file), (${SOURCE_TIME}, ${SOURCE_TIME}))
`);
}

/** Write a pack's files under BYTECODE_DIR. Throws if the pack is not one. */
export function unpackBytecode(pyodide, pack) {
  const view = new DataView(pack.buffer, pack.byteOffset, pack.byteLength);
  const headerBytes = view.getUint32(0, true);
  const files = JSON.parse(new TextDecoder().decode(pack.subarray(4, 4 + headerBytes)));
  let at = 4 + headerBytes;
  for (const [path, bytes] of files) {
    if (typeof path !== "string" || !path.startsWith(`${BYTECODE_DIR}/`) || path.includes("..") || !path.endsWith(".pyc")
        || !Number.isInteger(bytes) || bytes < 0 || at + bytes > pack.byteLength) {
      throw new Error(`the kept bytecode has an unreadable entry (${JSON.stringify(path)})`);
    }
    pyodide.FS.mkdirTree(path.slice(0, path.lastIndexOf("/")));
    pyodide.FS.writeFile(path, pack.subarray(at, at + bytes));
    at += bytes;
  }
  if (at !== pack.byteLength) throw new Error("the kept bytecode has bytes after its last file");
  return files.length;
}

/** Every .pyc Python has written under BYTECODE_DIR, as one pack: {pack, files}. */
export function packBytecode(pyodide) {
  const { FS } = pyodide;
  const paths = [];
  const walk = (dir) => {
    for (const name of FS.readdir(dir)) {
      if (name === "." || name === "..") continue;
      const path = `${dir}/${name}`;
      if (FS.isDir(FS.stat(path).mode)) walk(path);
      else if (name.endsWith(".pyc")) paths.push(path);
    }
  };
  walk(BYTECODE_DIR);
  const bodies = paths.map((path) => FS.readFile(path));
  const header = new TextEncoder().encode(JSON.stringify(paths.map((path, i) => [path, bodies[i].byteLength])));
  const pack = new Uint8Array(4 + header.byteLength + bodies.reduce((sum, body) => sum + body.byteLength, 0));
  new DataView(pack.buffer).setUint32(0, header.byteLength, true);
  pack.set(header, 4);
  let at = 4 + header.byteLength;
  for (const body of bodies) {
    pack.set(body, at);
    at += body.byteLength;
  }
  return { pack, files: paths.length };
}
