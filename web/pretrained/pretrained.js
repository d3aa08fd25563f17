// The real model's card, under the model list while Model is SmolLM2: what the model is, Load
// and Stop, the download's bytes and time left, the check of its SHA-256 and the reading of
// its parts, then its shape, and a chat with it. A GGUF file of the learner's own may take its
// place (what it must be is Python's to say: webapi.pretrained.reads). The worker does the work (runtime/modelfile.js
// and worker.js's loadModel); the store keeps whether the model is loaded
// (store.pretrainedLoaded) and the conversation (store.chatSaid), and a run with Model SmolLM2
// is refused by Python, in words, until it is loaded. A chat turn is a run of the workbench
// (state/run.js) with the conversation as "messages": Python renders the template and reuses
// the last turn's cache (webapi.pretrained.chat_start).

import { $ } from "../ui/dom.js";
import { readable } from "../ui/render.js";
import { bytes, bytesOf } from "../ui/bytes.js";

const MODEL = "smollm2";
const SHORT_MEMORY_GB = 4; // navigator.deviceMemory under this: the page warns before loading

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** What the loaded model is, in one line of the page's words. */
export function facts(info) {
  return (info.name ? `${info.name}: ` : "") + [
    `${Math.round(info.params / 1e6)} million parameters`,
    `${info.n_layer} layers`,
    `${info.n_head} query heads sharing ${info.n_kv_head} key-value heads of ${info.head_dim}`,
    `${info.vocab_size.toLocaleString("en")} tokens`,
    `${info.context_size.toLocaleString("en")} positions kept (trained on ${Number(info.trained_context).toLocaleString("en")})`,
    `its KV cache takes ${bytes(info.bytes_per_token)} a token (float32)`,
  ].join(" · ") + ".";
}

/** What a file of one's own must be, from Python's reader (webapi.pretrained.reads). */
export function ownFile(reads) {
  const types = reads.types.join(", ").replace(/, ([^,]*)$/, " or $1");
  return `A model of ${reads.architectures.join(" or ")}’s architecture (as SmolLM2 is: the file says so) with a byte-level BPE tokenizer, its weights stored as ${types}, a file of up to ${bytes(reads.max_file_bytes)}. It takes this model’s place in the page for this visit: runs and chats with Model SmolLM2 then use it, and it is not kept in this browser.`;
}

/** What a chat turn read of its prompt (start's reply "chat"), in a sentence or two. */
export function turnWords(chat) {
  const n = chat.prompt_tokens;
  if (chat.dropped) {
    const fmt = (x) => x.toLocaleString("en");
    return `The conversation is ${fmt(n)} tokens, more than the ${fmt(chat.window)} positions the model keeps: its oldest ${fmt(chat.dropped)} tokens, from the start of the conversation, were dropped (the context shift’s rule), and the model answered from the last ${fmt(n - chat.dropped)} alone. Start a new conversation to be read whole.`;
  }
  return chat.reused
    ? `This turn read ${n - chat.reused} new tokens of its prompt’s ${n}: the other ${chat.reused} were in the cache of the turn before.`
    : `This turn read its whole prompt, ${n} tokens.`;
}

/** What a chat turn over the window will drop, said as it starts, before the model reads it. */
export function droppingWords(chat) {
  const fmt = (x) => x.toLocaleString("en");
  return `The conversation is ${fmt(chat.prompt_tokens)} tokens, more than the ${fmt(chat.window)} positions the model keeps: its oldest ${fmt(chat.dropped)} tokens, from the start of the conversation, are dropped (the context shift’s rule), and the model reads the last ${fmt(chat.prompt_tokens - chat.dropped)}, a part at a time (Stop ends it there).`;
}

const WHO = { system: "System", user: "You", assistant: "SmolLM2" };

export function createPretrained(store, client, runs) {
  const dom = {
    card: $("pretrained"),
    load: $("pretrained-load"),
    stop: $("pretrained-stop"),
    bar: $("pretrained-bar"),
    status: $("pretrained-status"),
    facts: $("pretrained-facts"),
    memory: $("pretrained-memory"),
    forget: $("pretrained-forget"),
    own: $("pretrained-own"),
    ownAbout: $("pretrained-own-about"),
    file: $("pretrained-file"),
    chat: $("chat"),
    log: $("chat-log"),
    system: $("chat-system"),
    message: $("chat-message"),
    send: $("chat-send"),
    restart: $("chat-new"),
    chatStatus: $("chat-status"),
    template: $("chat-template"),
    templateSummary: $("chat-template-summary"),
    tokens: $("chat-tokens"),
  };
  let loading = null; // {id} while a load is under way
  let kept = false; // this browser keeps a copy of the file (the last load said so)
  let then = null; // a run that waits for the load (a link's first sample with this model)
  let from = null; // where the loaded model came from: "site", "kept" or "disk" (the last load)
  let again = false; // the load under way reads the model back after Python was restarted

  // Panels that ask for the real model in a form of their own (right answers against
  // temperature, serving) carry a Load of their own, [data-load-real]: a button and a line that
  // follows this card's status while a load goes on. The same load, for a chapter or a widget
  // where this card is not on screen.
  const mirrors = [...document.querySelectorAll("[data-load-real]")].map((node) => {
    const line = node.querySelector("[data-load-status]");
    return { node, button: node.querySelector("button"), line, idle: line.textContent };
  });

  function say(text, { failed = false } = {}) {
    dom.status.textContent = text;
    dom.status.classList.toggle("error", failed);
    for (const m of mirrors) {
      m.line.textContent = loading || failed ? text : m.idle;
      m.line.classList.toggle("failed", failed);
    }
  }

  function draw() {
    const state = store.state;
    const chosen = state.raw.model === MODEL;
    dom.card.hidden = !chosen;
    if (!chosen) then = null; // another model chosen: the link's run is no longer waited for
    // a widget whose link fixes the model (its control not shown, its group locked) still
    // needs the card, to load the model on the learner's request: it stands before the group
    const group = dom.card.closest(".group");
    if (chosen && group && group.dataset.locked) group.before(dom.card);
    // and a widget without its controls panel has it before the first part it shows
    if (chosen && dom.card.closest("[data-panel-off]")) {
      const shown = document.querySelector("#main [data-panel]:not([data-panel-off])");
      if (shown) shown.before(dom.card);
    }
    const { loaded, info } = state.pretrained;
    for (const m of mirrors) {
      m.node.hidden = loaded;
      m.button.disabled = Boolean(loading) || state.phase === "loading" || state.phase === "error";
    }
    dom.load.hidden = loaded || Boolean(loading);
    dom.load.disabled = state.phase === "loading" || state.phase === "error";
    dom.stop.hidden = !loading;
    dom.bar.hidden = !loading;
    dom.facts.hidden = !loaded;
    dom.forget.hidden = !kept || Boolean(loading);
    dom.file.disabled = Boolean(loading) || state.phase === "loading" || state.phase === "error";
    const reads = state.info && state.info.pretrained && state.info.pretrained.reads;
    if (reads) dom.ownAbout.textContent = ownFile(reads);
    dom.chat.hidden = !loaded;
    dom.send.disabled = !canSend(state);
    dom.system.disabled = state.chat.length > 0; // the system message opens a conversation
    dom.log.replaceChildren(...state.chat.map((m) => {
      const item = document.createElement("li");
      item.dataset.role = m.role;
      item.dataset.who = WHO[m.role] || m.role;
      item.textContent = m.content;
      return item;
    }));
    if (loaded && info) dom.facts.textContent = facts(info);
  }

  // The device says it has little memory: said before anything is downloaded.
  const memory = typeof navigator !== "undefined" ? navigator.deviceMemory : undefined;
  if (typeof memory === "number" && memory < SHORT_MEMORY_GB) {
    dom.memory.hidden = false;
    dom.memory.textContent = `This device says it has about ${memory} GiB of memory; the model needs about 0.7 GiB of it, so loading may fail here. The trained models work either way.`;
  }

  client.on("model-progress", (m) => {
    if (!loading || m.id !== loading.id) return;
    if (m.phase === "download") {
      dom.bar.value = m.total ? m.got / m.total : 0;
      const left = m.left_ms > 0 ? `, about ${Math.max(1, Math.round(m.left_ms / 1000))} s left` : "";
      say(`Downloading: ${bytesOf(m.got, m.total)}${left}.`);
    } else if (m.phase === "check") {
      dom.bar.removeAttribute("value"); // indeterminate while the digest is computed
      say(`Checking the file’s SHA-256 against the one this site lists…`);
    } else if (m.phase === "read") {
      dom.bar.value = m.total ? m.done / m.total : 0;
      const part = m.part === "done" ? "done" : m.part;
      say(`Reading the model into numpy: ${m.done} of ${m.total} parts (next: ${part}).`);
    }
  });

  function loaded(result) {
    const ms = result.ms || {};
    const after = then;
    then = null;
    from = result.from;
    if (after) queueMicrotask(after); // the link's run, once the model is there
    if (again) {
      const where = result.from === "kept" ? "from the copy kept in this browser" : "from the site";
      say(`Python was restarted, so the model was read again ${where} in ${seconds(ms.total)}; your settings and the conversation go on.`);
      kept = Boolean(result.kept) || result.from === "kept";
      store.pretrainedLoaded(result.info);
      return;
    }
    if (result.from === "disk") {
      say(`Loaded ${result.info.name || "the model"} from your file ${result.name} (${bytes(result.bytes)}) in ${seconds(ms.total)}. It is not kept in this browser. Press Generate to run it.`);
      store.pretrainedLoaded(result.info);
      return;
    }
    const where = result.from === "kept"
      ? `from the copy kept in this browser (checked) in ${seconds(ms.total)}`
      : `in ${seconds(ms.total)}: downloaded ${bytes(result.bytes)} in ${seconds(ms.download)}, checked in ${seconds(ms.check)}, read in ${seconds(ms.read)}`;
    const keeping = result.from === "site"
      ? (result.kept ? " Kept in this browser, so the next visit needs no download." : " This browser would not keep it, so the next visit downloads it again.")
      : "";
    say(`Loaded ${where}.${keeping} Press Generate to run it.`);
    kept = Boolean(result.kept);
    store.pretrainedLoaded(result.info);
  }

  // Load the site's file (`file` absent) or a File the learner opened; the model loaded before,
  // if any, stays until the new one is read whole.
  async function load(file) {
    if (loading) return;
    loading = { id: client.id() };
    dom.bar.value = 0;
    say(file ? `Reading your file ${file.name}…` : "Finding the model’s file…");
    draw();
    let result;
    try {
      const asked = file ? { file } : { model: MODEL };
      result = (await client.request({ type: "load-model", id: loading.id, ...asked })).result;
    } catch (err) {
      result = { ok: false, message: `The model could not be loaded: ${err.message}` };
    }
    loading = null;
    if (result.ok) loaded({ ...result, name: file && file.name });
    else if (file && !result.stopped) say(`Your file ${file.name} was not loaded: ${result.message}${store.state.pretrained.loaded ? " The model loaded before stays." : ""}`, { failed: true });
    else say(result.message, { failed: !result.stopped });
    again = false;
    draw();
    if (!result.ok && !result.stopped && !file) dom.load.textContent = "Try again";
  }

  // A file from disk: its size checked against the reader's limit before a byte is read.
  function open() {
    const file = dom.file.files && dom.file.files[0];
    dom.file.value = ""; // the same file may be chosen again
    if (!file || loading) return;
    const reads = store.state.info && store.state.info.pretrained && store.state.info.pretrained.reads;
    if (reads && file.size > reads.max_file_bytes) {
      say(`Your file ${file.name} is ${bytes(file.size)}; decodelab reads GGUF files up to ${bytes(reads.max_file_bytes)} (their float32 weights must fit in this tab’s memory). Nothing was read.`, { failed: true });
      return;
    }
    load(file);
  }

  dom.load.addEventListener("click", () => load());
  for (const m of mirrors) m.button.addEventListener("click", () => load());
  dom.file.addEventListener("change", open);
  dom.stop.addEventListener("click", () => {
    if (loading) client.post({ type: "stop", id: loading.id });
  });
  // The kept copy is 94 MiB of this browser's storage: the learner may take it back. The model
  // stays loaded in this page; the next load downloads the file again.
  dom.forget.addEventListener("click", async () => {
    await client.request({ type: "forget-model" });
    kept = false;
    say("The copy kept in this browser is deleted; the model stays loaded in this page, and the next load downloads it again.");
    draw();
  });

  // A turn can be sent when the page is ready, or while the last turn's cache check catches up
  // after its text: the check is then given up for the new turn (worker.js), which never waits.
  // A turn sent and not started yet holds Send (its run is on its way).
  let latest = 0; // the last turn sent
  let starting = false;
  const canSend = (state) => !starting && (state.phase === "ready"
    || (state.phase === "generating" && Boolean(state.run && state.run.chat && state.run.checking && !state.run.done)));
  store.subscribe((change, state) => {
    if (change.type === "steps" || change.type === "run-end") dom.send.disabled = !canSend(state);
  });

  // A chat turn: the conversation so far and the new message, run as the workbench runs.
  async function send() {
    const text = dom.message.value;
    if (!text.trim()) {
      dom.chatStatus.textContent = "Type a message first.";
      return;
    }
    const me = ++latest;
    starting = true;
    dom.send.disabled = true;
    try {
      await turn(me, text);
    } finally {
      if (me === latest) starting = false;
      dom.send.disabled = !canSend(store.state);
    }
  }

  async function turn(me, text) {
    // a chat turn runs with the workbench's rules; its prompt is the conversation, not the box's
    const checked = await store.collect();
    if (Object.keys(checked.errors || {}).some((name) => name !== "prompt")) {
      dom.chatStatus.textContent = "Fix the settings marked above first: a chat turn runs with them.";
      return;
    }
    const settings = checked.settings || { ...store.state.check.values };
    const opening = store.state.chat.length === 0 && dom.system.value.trim()
      ? [{ role: "system", content: dom.system.value }] : [];
    const asked = [...opening, { role: "user", content: text }];
    const messages = [...store.state.chat, ...asked];
    // a turn never waits for the last one's cache check: the check is given up (worker.js)
    const before = store.state.run;
    dom.chatStatus.textContent = before && before.checking && !before.done
      ? "The model is answering… (the cache check of the turn before was given up, so this turn need not wait for it)"
      : "The model is answering…";
    // the answer joins the conversation once its text has ended: with the check on, before the
    // live check's full pass over the whole conversation (the check changes no token), and the
    // status says what that wait is (longer as the chat grows)
    let answered = false;
    const answer = (text) => {
      if (answered) return;
      answered = true;
      store.chatSaid([...asked, { role: "assistant", content: text }]);
    };
    let mine = null; // this turn's run, from its start
    const unheard = store.subscribe((change) => {
      if (change.type === "run-start" && !mine) {
        mine = change.run;
        starting = false; // its run has started: Send follows the run's state again
      }
      if (change.run !== mine || !mine) return;
      if (change.type === "run-start" && mine.chat && mine.chat.dropped) {
        dom.chatStatus.textContent = droppingWords(mine.chat); // before any reading
        return;
      }
      // (the check catches up over several batches: the first one says it)
      if (change.type !== "steps" || !mine.checking || !mine.chat || answered) return;
      answer(mine.text);
      dom.chatStatus.textContent = "Answered. The cache check is now comparing the turn with one full pass over the whole conversation, which takes longer as the chat grows (send the next message to give it up, or switch Cache check off to skip it).";
    });
    const result = await runs.start({ ...settings, messages }).finally(unheard);
    if (me !== latest) { // a newer turn was sent during this one's check: its words stand
      answer(result.text);
      return; // (that turn's status is the one shown)
    }
    if (result.status !== "done") {
      const said = (result.errors || []).map((e) => e.message).join(" ") || result.message || "The turn did not run.";
      dom.chatStatus.textContent = said;
      return;
    }
    answer(result.text);
    dom.message.value = "";
    const turn = store.state.run && store.state.run.chat;
    if (turn) showTemplate(turn);
    dom.chatStatus.textContent = turn ? turnWords(turn) : "This turn read its whole prompt.";
  }

  // The last turn's prompt, token by token: the special tokens the template placed, marked.
  function showTemplate(chat) {
    dom.template.hidden = false;
    const specials = chat.tokens.filter(([, special]) => special).length;
    const reused = chat.reused ? `; the first ${chat.reused}, faded, came from the cache` : "";
    const dropped = chat.dropped ? `; the first ${chat.dropped}, struck through, did not fit the window` : "";
    dom.templateSummary.textContent = `The prompt as the model read it (${chat.prompt_tokens} tokens, ${specials} of them special${reused}${dropped})`;
    dom.tokens.replaceChildren(...chat.tokens.map(([label, special], i) => {
      const chip = document.createElement("span");
      chip.className = `chip${special ? " special" : ""}${i < chat.reused ? " reused" : ""}${i < chat.dropped ? " dropped" : ""}`;
      chip.textContent = special ? label : readable(label);
      return chip;
    }));
  }

  dom.send.addEventListener("click", send);
  dom.restart.addEventListener("click", () => {
    store.chatSaid(null);
    dom.template.hidden = true;
    dom.chatStatus.textContent = "A new conversation: the next message starts it.";
  });

  // The worker that held the model was replaced: the model went with it. The site's model is
  // read back at once (from the copy this browser keeps: a second or two, no download); a file
  // of the learner's own is theirs to open again.
  client.listen("restarted", () => {
    if (!store.state.pretrained.loaded) return;
    store.pretrainedLoaded(null);
    if (from === "disk") {
      say("Python was restarted, and your model went with it; open your file again to go on.");
      return;
    }
    again = true;
    load();
  });

  store.subscribe((change) => {
    if (["info", "settings", "phase", "pretrained", "checked", "chat"].includes(change.type)) draw();
  });
  draw();

  return {
    /** For tests: load the model as the button does; a Promise of when it has ended. */
    load: () => load(),
    /** A link's run with the real model chosen and not loaded waits for the learner's Load
     * (94 MiB are never fetched unasked): true when `run` waits, false when there is nothing to
     * wait for. */
    runWhenLoaded(run) {
      if (store.state.raw.model !== MODEL || store.state.pretrained.loaded) return false;
      then = run;
      say("This link runs SmolLM2-135M-Instruct, a real model: press Load the model, and its first sample follows.");
      return true;
    },
    /** For tests: send the message box's text as the button does; a Promise of the turn. */
    send,
    /** The last chat turn's prompt, as Python described it ({prompt_tokens, tokens, reused}). */
    get lastTurn() {
      return store.state.run && store.state.run.chat ? store.state.run.chat : null;
    },
    get loading() {
      return loading;
    },
    get loaded() {
      return store.state.pretrained.loaded;
    },
  };
}
