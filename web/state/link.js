// Settings in the address: the address is a view of the store's settings, so a link reproduces
// a run: ?dataset=names&prompt=ma&seed=3&temperature=0.8&run=1
//
// A link is input like any other: its settings are checked by Python with the same field table
// that checks the form, in the same words (the "check" endpoint). A bad entry is named in a
// notice; that setting keeps its value and the rest still applies. The same check serves the
// settings a host page sends to an embedded widget (embed.js). Besides settings, a few
// parameters describe the page itself (state/query.js, VIEW_PARAMS).

import { copyText, flash } from "../ui/copy.js";
import { $ } from "../ui/dom.js";
import { panelFromQuery, queryValues, settingsFromQuery, viewFromQuery } from "./query.js";
import { settingsQuery } from "./settings.js";

/** The theme on <html>: light and dark are forced, auto follows the system. */
export function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
}

/**
 * Wire the address to the page: apply the settings of the address once Python is ready (before
 * the page says it is), keep the address up to date while the learner edits (without adding
 * history entries), and let "Copy link" copy a link that reproduces the run.
 */
export function installUrlState(page) {
  const { store, hooks, form } = page;
  const notice = $("link-notice");
  const copyButton = $("copy-link");
  const linkField = $("share-link");
  const shareStatus = $("share-status");
  const values = queryValues(location.search);
  const panelNames = [...new Set([...document.querySelectorAll("[data-panel]")].map((n) => n.dataset.panel))];
  const { view, errors: viewErrors } = viewFromQuery(values, panelNames, form.names, hooks.lesson?.questions?.ids);
  applyTheme(view.theme);

  const share = {
    view,
    errors: [], // every problem found in the address, once checked
    applied: null, // the settings the address set, once ready
    settable: () => store.state.names,
    read: () => store.values(),
    check: (raw) => check(store, raw),
    /** The form's settings, as Python reads them (only those that pass its checks). */
    current: () => store.settled().then((c) => ({ ...c.values })),
    link: (extra) => pageLink(store, extra),
    /** A panel's own settings as the address gave them ({} when it gave none). */
    panel: (names) => panelFromQuery(values, names),
    copyLink,
  };
  hooks.share = share;

  page.beforeReady(async () => {
    const panelOwn = Object.values(store.state.info.panel_settings || {}).flat();
    const fromQuery = settingsFromQuery(values, store.state.names, store.state.specs, panelOwn);
    const checked = await check(store, fromQuery.raw);
    await store.apply(checked.values);
    share.applied = checked.values;
    share.errors = [...viewErrors, ...fromQuery.errors, ...checked.errors];
    showNotice(notice, share.errors, "link");
    if (copyButton) copyButton.disabled = false;
    if (linkField) linkField.value = pageLink(store, { run: "true" });
  });

  // Keep the address (of the full page; an embedded widget keeps its own) and the link field in
  // step with the settings, so a reload or a bookmark keeps them.
  let timer = 0;
  const update = () => {
    clearTimeout(timer);
    timer = 0;
    if (!store.state.info) return;
    if (!view.embed) history.replaceState(history.state, "", pageLink(store) + location.hash); // the chapter stays
    if (linkField) linkField.value = pageLink(store, { run: "true" });
  };
  store.subscribe((change) => {
    if (change.type === "asked") return update();
    if (change.type !== "settings" || !store.state.info) return;
    clearTimeout(timer);
    timer = setTimeout(update, 250);
  });

  async function copyLink() {
    const link = pageLink(store, { run: "true" });
    if (linkField) linkField.value = link;
    const copied = await copyText(link);
    // Datasets trained here from pasted text are not among those Python started with.
    const shipped = store.state.specs.dataset?.choices || [];
    const custom = !shipped.includes(store.state.raw.dataset);
    let words = copied ? "Link copied." : "Copying is blocked here: select the link below and copy it.";
    if (custom) words += " Your own training text stays in this page, so the link cannot bring it along.";
    if (shareStatus) shareStatus.textContent = words;
    flash(copyButton, copied ? "Link copied" : "Link below");
    hooks.announce?.(words);
    if (!copied && linkField) {
      linkField.focus();
      linkField.select();
    }
    return link;
  }

  if (copyButton) copyButton.addEventListener("click", () => copyLink());
  return share;
}

/**
 * Raw settings (from a link: strings; from a host page: JSON values) checked by Python on top of
 * the form's settings. Returns {values, errors}: values holds only the given settings that
 * passed, errors [{field, message}] one per bad setting given (a pair that fails together, min
 * and max new tokens, leaves out both).
 */
export async function check(store, raw) {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return { values: {}, errors: [{ field: "settings", message: "Settings must be an object of name: value." }] };
  }
  const reply = await store.verify({ ...store.values(), ...raw });
  const given = new Set(Object.keys(raw));
  // a setting that waits for the learner (the real model, not loaded yet) is taken: its card
  // says what to do, and a run says it again
  const errors = reply.errors.filter((e) => !e.pending)
    .filter((e) => given.has(e.field) || (e.also || []).some((name) => given.has(name)))
    .map(({ field, message }) => ({ field, message }));
  const refused = new Set(reply.errors.filter((e) => errors.some((x) => x.field === e.field)).flatMap((e) => [e.field, ...(e.also || [])]));
  const values = Object.fromEntries(Object.entries(reply.values).filter(([name]) => given.has(name) && !refused.has(name)));
  return { values, errors };
}

/** This page with the form's settings in the address (plus the theme, when one is forced):
 * those that apply to the model chosen, as Python last said (a model that brings its own
 * tokenizer and data, SmolLM2, takes no dataset or tokenizer). */
export function pageLink(store, extra = {}) {
  const theme = document.documentElement.dataset.theme;
  const applies = (store.state.check && store.state.check.applies) || {};
  const names = store.state.names.filter((name) => applies[name] !== false);
  const query = settingsQuery(store.values(), names, { ...(theme ? { theme } : {}), ...extra });
  const url = new URL(location.href);
  url.search = query;
  url.hash = "";
  // An embedded widget shares the full page, which lives beside it.
  url.pathname = url.pathname.replace(/[^/]*$/, "");
  return url.href;
}

/**
 * List problems with given settings in the notice above the run buttons.
 * source: "link" (the page's address) or "host" (settings a host page sent to the widget).
 */
export function showNotice(notice, errors, source = "link") {
  if (!notice) return;
  if (!errors.length) {
    notice.hidden = true;
    notice.replaceChildren();
    return;
  }
  const title = document.createElement("p");
  title.className = "notice-title";
  const where = source === "host" ? "sent by this page" : "in this link";
  title.textContent = errors.length === 1
    ? `One setting ${where} could not be used:`
    : `${errors.length} settings ${where} could not be used:`;
  const list = document.createElement("ul");
  for (const e of errors) {
    const li = document.createElement("li");
    li.textContent = e.message;
    list.append(li);
  }
  const after = document.createElement("p");
  after.textContent = source === "host"
    ? "Those keep their current values; everything else applies."
    : "Those keep their usual values; everything else in the link applies.";
  notice.replaceChildren(title, list, after);
  notice.hidden = false;
}
