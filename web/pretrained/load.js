// The real model's load: the site's file (downloaded, or the copy this browser keeps) or a GGUF
// file of the learner's own, read by the worker (runtime/modelfile.js and worker.js's loadModel),
// a part at a time. Everything about it is the store's (state.pretrained): that a load is under
// way, how it goes in words and how far, what was loaded, from where, and whether this browser
// keeps a copy. The card (card.js), its copies in other panels and the chat draw from there.
//
// Which model is the real one, and its name, are Python's (setup's models: state/settings.js's
// realModel). A run with it is refused by Python, in words, until it is loaded.

import { bytes, bytesOf } from "../ui/bytes.js";
import { realModel } from "../state/settings.js";

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** What a load that ended well read, in a sentence: where from, how long, what is kept. */
export function loadedWords(result, { again = false, file = null } = {}) {
  const ms = result.ms || {};
  if (again) {
    const where = result.from === "kept" ? "from the copy kept in this browser" : "from the site";
    return `Python was restarted, so the model was read again ${where} in ${seconds(ms.total)}; your settings and the conversation go on.`;
  }
  if (result.from === "disk") {
    return `Loaded ${result.info.name || "the model"} from your file ${file} (${bytes(result.bytes)}) in ${seconds(ms.total)}. It is not kept in this browser. Press Generate to run it.`;
  }
  const where = result.from === "kept"
    ? `from the copy kept in this browser (checked) in ${seconds(ms.total)}`
    : `in ${seconds(ms.total)}: downloaded ${bytes(result.bytes)} in ${seconds(ms.download)}, checked in ${seconds(ms.check)}, read in ${seconds(ms.read)}`;
  const keeping = result.from === "site"
    ? (result.kept ? " Kept in this browser, so the next visit needs no download." : " This browser would not keep it, so the next visit downloads it again.")
    : "";
  return `Loaded ${where}.${keeping} Press Generate to run it.`;
}

export function createLoad(store, client) {
  let then = null; // a run that waits for the load (a link's first sample with this model)
  const pretrained = () => store.state.pretrained;
  const say = (text, { failed = false, retry = false, bar } = {}) => store.pretrainedSaid({ text, failed, retry }, bar);

  client.on("model-progress", (m) => {
    const loading = pretrained().loading;
    if (!loading || m.id !== loading.id) return;
    if (m.phase === "download") {
      const left = m.left_ms > 0 ? `, about ${Math.max(1, Math.round(m.left_ms / 1000))} s left` : "";
      say(`Downloading: ${bytesOf(m.got, m.total)}${left}.`, { bar: m.total ? m.got / m.total : 0 });
    } else if (m.phase === "check") {
      say("Checking the file’s SHA-256 against the one this site lists…", { bar: "busy" }); // while the digest is computed
    } else if (m.phase === "read") {
      const part = m.part === "done" ? "done" : m.part;
      say(`Reading the model into numpy: ${m.done} of ${m.total} parts (next: ${part}).`, { bar: m.total ? m.done / m.total : 0 });
    }
  });

  let opened = null; // the learner's own file, last read: read again for another engine

  // Load the site's file (`file` absent) or a File the learner opened, for the engine chosen
  // (state.pretrained.engine); the model loaded before, if any, stays until the new one is read
  // whole. `again`: read back after Python was restarted; `switched`: read for another engine.
  async function load(file = null, { again = false, switched = false } = {}) {
    const real = realModel(store.state.info);
    if (pretrained().loading || !real) return;
    const loading = { id: client.id(), again, file: file ? file.name : null };
    store.pretrainedLoading(loading);
    say(file ? `Reading your file ${file.name}…` : "Finding the model’s file…", { bar: 0 });
    let result;
    try {
      const asked = { ...(file ? { file } : { model: real.id }), engine: pretrained().engine };
      result = (await client.request({ type: "load-model", id: loading.id, ...asked })).result;
    } catch (err) {
      result = { ok: false, message: `The model could not be loaded: ${err.message}` };
    }
    const before = pretrained().loaded;
    store.pretrainedLoading(null);
    if (result.ok) {
      const after = then;
      then = null;
      // read for another engine mid-conversation: the cache of its turns was the other engine's
      const chat = switched && store.state.chat.some((m) => m.role === "assistant")
        ? " The conversation goes on; its next turn reads it whole again, as the cache of the turns before held the other engine’s numbers."
        : "";
      say(loadedWords(result, { again, file: loading.file }) + chat, { bar: null });
      // (a file of one's own is not kept, and leaves the site's kept copy as it was)
      const kept = result.from === "disk" ? pretrained().kept : Boolean(result.kept) || result.from === "kept";
      if (result.from === "disk") opened = file;
      else if (!again) opened = null;
      store.pretrainedLoaded(result.info, { from: result.from, kept });
      if (after) queueMicrotask(after); // the link's run, once the model is there
    } else if (file && !result.stopped) {
      say(`Your file ${file.name} was not loaded: ${result.message}${before ? " The model loaded before stays." : ""}`, { failed: true, bar: null });
    } else {
      say(result.message, { failed: !result.stopped, retry: !result.stopped && !file, bar: null });
    }
  }

  // Another model chosen: the link's run is no longer waited for.
  store.subscribe((change, state) => {
    if (change.type !== "settings" || !change.names.includes("model")) return;
    const real = realModel(state.info);
    if (!real || state.raw.model !== real.id) then = null;
  });

  // The worker that held the model was replaced: the model went with it. The site's model is
  // read back at once (from the copy this browser keeps: a second or two, no download); a file
  // of the learner's own is theirs to open again.
  client.listen("restarted", () => {
    if (!pretrained().loaded) return;
    store.pretrainedLoaded(null);
    if (pretrained().from === "disk") {
      say("Python was restarted, and your model went with it; open your file again to go on.");
      return;
    }
    load(null, { again: true });
  });

  return {
    load,
    say,
    /** Another engine chosen: the next load reads the file for it, and a model loaded already is
     * read again now (the site's file from this browser's copy, or the learner's own file). */
    choose(engine) {
      if (engine === pretrained().engine || pretrained().loading) return;
      store.pretrainedEngine(engine);
      const loaded = pretrained().info;
      if (pretrained().loaded && loaded && loaded.engine !== engine) {
        load(pretrained().from === "disk" ? opened : null, { switched: true });
      }
    },
    /** Stop the load under way (between two of its parts). */
    stop() {
      const loading = pretrained().loading;
      if (loading) client.post({ type: "stop", id: loading.id });
    },
    /** The kept copy (94 MiB of this browser's storage) goes: the learner takes it back. The
     * model stays loaded in this page; the next load downloads the file again. */
    async forget() {
      await client.request({ type: "forget-model" });
      store.pretrainedKept(false);
      say("The copy kept in this browser is deleted; the model stays loaded in this page, and the next load downloads it again.");
    },
    /** A link's run with the real model chosen and not loaded waits for the learner's Load
     * (its file is never fetched unasked): true when `run` waits, false when there is nothing
     * to wait for. */
    runWhenLoaded(run) {
      const real = realModel(store.state.info);
      if (!real || store.state.raw.model !== real.id || pretrained().loaded) return false;
      then = run;
      say(`This link runs ${real.title}, a real model: press Load the model, and its first sample follows.`);
      return true;
    },
  };
}
