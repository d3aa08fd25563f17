// Many files of Python's file system as one Uint8Array, for kept.js to keep: a 4-byte
// little-endian length, a JSON list of [path, bytes], then the files one after another.

/** The files at `paths` as one pack. */
export function packFiles(FS, paths) {
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
  return pack;
}

/**
 * Write a pack's files back, each only if allowed(path) says it may go there; returns how many.
 * Throws, naming `what`, if the pack is not one or names a path it may not.
 */
export function unpackFiles(FS, pack, allowed, what) {
  const view = new DataView(pack.buffer, pack.byteOffset, pack.byteLength);
  const headerBytes = view.getUint32(0, true);
  const files = JSON.parse(new TextDecoder().decode(pack.subarray(4, 4 + headerBytes)));
  let at = 4 + headerBytes;
  for (const [path, bytes] of files) {
    if (typeof path !== "string" || path.includes("..") || !allowed(path)
        || !Number.isInteger(bytes) || bytes < 0 || at + bytes > pack.byteLength) {
      throw new Error(`the kept ${what} has an unreadable entry (${JSON.stringify(path)})`);
    }
    FS.mkdirTree(path.slice(0, path.lastIndexOf("/")));
    FS.writeFile(path, pack.subarray(at, at + bytes));
    at += bytes;
  }
  if (at !== pack.byteLength) throw new Error(`the kept ${what} has bytes after its last file`);
  return files.length;
}

/** Every file below `dir` (a folder of FS) whose name passes keep(name), depth first. */
export function filesBelow(FS, dir, keep = () => true) {
  const found = [];
  const walk = (folder) => {
    for (const name of FS.readdir(folder)) {
      if (name === "." || name === "..") continue;
      const path = `${folder}/${name}`;
      if (FS.isDir(FS.stat(path).mode)) walk(path);
      else if (keep(name)) found.push(path);
    }
  };
  walk(dir);
  return found;
}
