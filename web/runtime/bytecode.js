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
// The files are kept as one pack (pack.js).

import { filesBelow, packFiles, unpackFiles } from "./pack.js";

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
  return unpackFiles(pyodide.FS, pack, (path) => path.startsWith(`${BYTECODE_DIR}/`) && path.endsWith(".pyc"), "bytecode");
}

/** Every .pyc Python has written under BYTECODE_DIR, as one pack: {pack, files}. */
export function packBytecode(pyodide) {
  const paths = filesBelow(pyodide.FS, BYTECODE_DIR, (name) => name.endsWith(".pyc"));
  return { pack: packFiles(pyodide.FS, paths), files: paths.length };
}
