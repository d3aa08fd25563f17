// The real model in the page, in four parts, one concept each: its load (load.js: the site's
// file or one of the learner's own, read by the worker, its state kept in the store), its card
// (card.js: Load, Stop, progress, its shape, Forget the kept copy), a GGUF file of one's own
// (ownfile.js) and the chat with it (chat.js). This composes them and gives the page, and the
// tests, one handle.

import { createCard } from "./card.js";
import { createChat } from "./chat.js";
import { createLoad } from "./load.js";
import { createOwnFile } from "./ownfile.js";

export function createPretrained(store, client, runs) {
  const load = createLoad(store, client);
  createCard(store, load);
  createOwnFile(store, load);
  const chat = createChat(store, runs);

  return {
    /** For tests: load the model as the button does; a Promise of when it has ended. */
    load: () => load.load(),
    /** A link's run waits for the learner's Load of the real model (load.js). */
    runWhenLoaded: (run) => load.runWhenLoaded(run),
    /** For tests: send the message box's text as the button does; a Promise of the turn. */
    send: () => chat.send(),
    /** The last chat turn's prompt, as Python described it ({prompt_tokens, tokens, reused}). */
    get lastTurn() {
      return chat.lastTurn;
    },
    get loading() {
      return store.state.pretrained.loading;
    },
    get loaded() {
      return store.state.pretrained.loaded;
    },
    /** What Python said of the model loaded ({engine, weight_bytes, params, ...}), or null. */
    get info() {
      return store.state.pretrained.info;
    },
  };
}
