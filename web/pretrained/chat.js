// The chat with the real model, under its card once it is loaded. A chat turn is a run of the
// workbench (state/run.js) with the conversation as "messages": Python renders the template and
// reuses the last turn's cache (webapi.pretrained.chat_start). The store keeps the conversation
// (store.chatSaid); this draws it, sends a turn, and says what the turn read of its prompt.

import { $ } from "../ui/dom.js";
import { readable } from "../ui/render.js";
import { realModel } from "../state/settings.js";

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

export function createChat(store, runs) {
  const dom = {
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

  // Who said what: the learner, the system message, and the model by its name (Python's).
  function draw() {
    const state = store.state;
    const who = { system: "System", user: "You", assistant: (realModel(state.info) || {}).name || "The model" };
    dom.chat.hidden = !state.pretrained.loaded;
    dom.send.disabled = !canSend(state);
    dom.system.disabled = state.chat.length > 0; // the system message opens a conversation
    dom.log.replaceChildren(...state.chat.map((m) => {
      const item = document.createElement("li");
      item.dataset.role = m.role;
      item.dataset.who = who[m.role] || m.role;
      item.textContent = m.content;
      return item;
    }));
  }

  store.subscribe((change) => {
    if (["info", "phase", "pretrained", "chat"].includes(change.type)) draw();
  });
  draw();

  return {
    send,
    /** The last chat turn's prompt, as Python described it ({prompt_tokens, tokens, reused}). */
    get lastTurn() {
      return store.state.run && store.state.run.chat ? store.state.run.chat : null;
    },
  };
}
