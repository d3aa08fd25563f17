// Run a Python script in Pyodide under Node with decodelab's kernels loaded as the page loads
// them: the side module written to Pyodide's file system, loaded into its heap, opened by
// ctypes. Used by tests/test_kernels.py to hold the WebAssembly build to the native one.
//
//   node tests/kernels/in_pyodide.mjs <numpy wheel> <side module> <folder> <a Python script>
//
// <folder> is mounted at /work (the script reads its inputs there and writes its outputs);
// the package's kernels folder is copied in, so `decodelab.core.kernels` imports as in the page.

import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const [wheel, module, folder, script] = process.argv.slice(2);
const { loadPyodide } = await import(path.join(root, "node_modules/pyodide/pyodide.mjs"));
const py = await loadPyodide({ indexURL: path.join(root, "node_modules/pyodide") + "/" });
await py.loadPackage([path.resolve(wheel)], { messageCallback: () => {} });

py.FS.writeFile("/lib/decodelab_kernels.so", readFileSync(module));
await py._module.loadDynamicLibrary("/lib/decodelab_kernels.so",
  { global: true, nodelete: true, fs: py.FS });

const pkg = path.join(root, "py/decodelab");
for (const dir of ["decodelab", "decodelab/core", "decodelab/core/kernels"]) py.FS.mkdirTree(`/pkg/${dir}`);
py.FS.writeFile("/pkg/decodelab/__init__.py", readFileSync(path.join(pkg, "__init__.py")));
py.FS.writeFile("/pkg/decodelab/core/__init__.py", readFileSync(path.join(pkg, "core/__init__.py")));
for (const name of readdirSync(path.join(pkg, "core/kernels"))) {
  if (name.endsWith(".py") || name.endsWith(".c")) {
    py.FS.writeFile(`/pkg/decodelab/core/kernels/${name}`, readFileSync(path.join(pkg, "core/kernels", name)));
  }
}
py.FS.mkdir("/work");
py.FS.mount(py.FS.filesystems.NODEFS, { root: path.resolve(folder) }, "/work");
py.runPython(`import os, sys; sys.path.insert(0, "/pkg"); os.environ["DECODELAB_KERNELS"] = "/lib/decodelab_kernels.so"`);
py.runPython(readFileSync(script, "utf8"));
