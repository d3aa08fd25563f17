// Take it to transformers (the Share panel): Python exports the last finished run's model and
// zips it with the script that repeats the run in transformers (lesson/handoff.py); the zip
// crosses as base64 and is downloaded here. A bigram is refused by Python, in words.

import { download } from "./exports.js";
import { $ } from "./dom.js";
import { bytes } from "./bytes.js";

/** Base64 text (how bytes cross from Python) to bytes. */
export function fromBase64(text) {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

export function installHandoff({ store, call, hooks }) {
  const button = $("handoff");
  const status = $("share-status");
  if (!button) return;
  let hasRun = false;
  hooks.handoff = { last: null }; // the last zip made: {name, bytes}

  store.subscribe((change) => {
    if (change.type !== "result") return;
    if ((change.result || {}).status === "done") hasRun = true;
    button.disabled = !hasRun; // a refused run leaves the last one
  });

  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = "Making the zip…";
    try {
      const reply = await call("handoff", {});
      if (!reply.ok) {
        status.textContent = reply.errors.map((e) => e.message).join(" ");
        return;
      }
      download(fromBase64(reply.zip), "application/zip", reply.name);
      hooks.handoff.last = { name: reply.name, bytes: reply.bytes };
      status.textContent = `Downloaded ${reply.name} (${bytes(reply.bytes)}). Unzip it and run python ${reply.script} inside the folder (pip install torch transformers first).`;
    } catch (err) {
      status.textContent = `The zip could not be made: ${err.message}`;
    } finally {
      button.disabled = !hasRun;
    }
  });
}
