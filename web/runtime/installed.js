// numpy and the decodelab package as installed, kept for the next start (kept.js keeps the
// bytes, pack.js packs them).
//
// Pyodide installs a wheel by unzipping it in Python, that is in WebAssembly: numpy's 3 MB wheel
// becomes 12 MB in 338 files, about 0.2 s of every start and 0.45 s of a first reload. So a
// start keeps the installed files, and the next one writes them back as they were and records
// the packages as loaded, as Pyodide's loader would have. Their compiled modules (.so) are then
// linked when an import first needs one, as in any Python, instead of all at install time
// (numpy's FFT and most of its test modules are never linked).
//
// The copy is keyed like the bytecode, by the runtime's files and both wheels, so it is only
// ever written back for the very wheels it was unpacked from.

import { filesBelow, packFiles, unpackFiles } from "./pack.js";

const PYODIDE_CHANNEL = "default channel"; // how Pyodide 0.27 records a package from its own folder

// The installed folders of the packages `names`: each package and its .dist-info.
function installedFolders(pyodide, names) {
  const found = pyodide.runPython(`
import importlib.util, os
_found = []
for _name in ${JSON.stringify(names)}:
    _folder = importlib.util.find_spec(_name).submodule_search_locations[0]
    _site = os.path.dirname(_folder)
    _found += [_folder] + [os.path.join(_site, _d) for _d in os.listdir(_site)
                           if _d.startswith(_name + "-") and _d.endswith(".dist-info")]
_found
`);
  try {
    return found.toJs();
  } finally {
    found.destroy();
  }
}

/** The installed files of the packages `names` (loaded), as one pack: {pack, files}. */
export function packInstalled(pyodide, names) {
  const paths = installedFolders(pyodide, names).flatMap((folder) => filesBelow(pyodide.FS, folder));
  return { pack: packFiles(pyodide.FS, paths), files: paths.length };
}

/**
 * Write a kept pack's files back into site-packages and record the packages `names` as loaded.
 * Throws (and records nothing) if the pack is not one or does not hold them all.
 */
export function restoreInstalled(pyodide, pack, names) {
  const site = pyodide.runPython("import sys; next(p for p in sys.path if p.endswith('/site-packages'))");
  unpackFiles(pyodide.FS, pack, (path) => path.startsWith(`${site}/`), "copy of the installed packages");
  pyodide.runPython("import importlib; importlib.invalidate_caches()");
  const missing = names.filter((name) => !pyodide.runPython(`import importlib.util; importlib.util.find_spec(${JSON.stringify(name)}) is not None`));
  if (missing.length) throw new Error(`the kept copy of the installed packages lacks ${missing.join(", ")}`);
  for (const name of names) pyodide.loadedPackages[name] = PYODIDE_CHANNEL;
}
