// A GGUF file of the learner's own, under the real model's card: what it must be (Python's
// reader says: webapi.pretrained.reads, at start-up), its size checked against the reader's
// limit before a byte is read, then the same load as the site's file (load.js). It takes the
// real model's place for this visit and is not kept.

import { $ } from "../ui/dom.js";
import { bytes } from "../ui/bytes.js";
import { realModel } from "../state/settings.js";

/** What a file of one's own must be, from Python's reader (webapi.pretrained.reads); `name`
 * is the real model's (setup's models). */
export function ownFile(reads, name) {
  const types = reads.types.join(", ").replace(/, ([^,]*)$/, " or $1");
  return `A model of ${reads.architectures.join(" or ")}’s architecture (as ${name} is: the file says so) with a byte-level BPE tokenizer, its weights stored as ${types}, a file of up to ${bytes(reads.max_file_bytes)}. It takes this model’s place in the page for this visit: runs and chats with Model ${name} then use it, and it is not kept in this browser.`;
}

function readsOf(state) {
  return state.info && state.info.pretrained && state.info.pretrained.reads;
}

export function createOwnFile(store, load) {
  const dom = { about: $("pretrained-own-about"), file: $("pretrained-file") };

  function draw() {
    const state = store.state;
    dom.file.disabled = Boolean(state.pretrained.loading) || state.phase === "loading" || state.phase === "error";
    const reads = readsOf(state);
    const real = realModel(state.info);
    if (reads && real) dom.about.textContent = ownFile(reads, real.name);
  }

  // A file from disk: its size checked against the reader's limit before a byte is read.
  function open() {
    const file = dom.file.files && dom.file.files[0];
    dom.file.value = ""; // the same file may be chosen again
    if (!file || store.state.pretrained.loading) return;
    const reads = readsOf(store.state);
    if (reads && file.size > reads.max_file_bytes) {
      load.say(`Your file ${file.name} is ${bytes(file.size)}; decodelab reads GGUF files up to ${bytes(reads.max_file_bytes)} (their float32 weights must fit in this tab’s memory). Nothing was read.`, { failed: true });
      return;
    }
    load.load(file);
  }

  dom.file.addEventListener("change", open);
  store.subscribe((change) => {
    if (["info", "phase", "pretrained"].includes(change.type)) draw();
  });
  draw();
}
