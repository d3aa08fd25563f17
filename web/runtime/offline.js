// Offline after the first visit: registers the site's service worker (sw.js) once the page is
// ready, so that saving the site's files never competes with the page's own start, and says what
// it holds.
//
// The state, for the page's footer and for tests (window.decodelab.offline):
//   "waiting"      not asked yet: the page has not finished its start
//   "checking"     asking the browser what it holds
//   "off"          the browser has no service workers or does not allow them here (a private
//                  window; an embed on another site, where third-party storage is blocked), or
//                  the site was built without the file list; the page works online as before
//   "saving"       the files are being saved (the first visit, or a new build)
//   "saved"        every file of this build is saved: the next visit works with no network
//   "update"       a new build is saved (`next`), waiting for the pages of this one to close
//   "failed"       saving failed (message says why); the page works online as before
// and `controlled`: this page itself was served from the saved files.

const STATES = {
  waiting: "",
  checking: "",
  off: "",
  saving: "Saving this lesson so that it opens without a network next time…",
  saved: "Saved on this device: the lesson opens without a network from now on.",
  update: "A new version of this lesson is saved on this device: it opens the next time you open the lesson.",
  failed: "This lesson could not be saved for use without a network; it works online as before.",
};

export function createOffline(note) {
  const status = {
    state: "waiting",
    controlled: Boolean(globalThis.navigator && navigator.serviceWorker && navigator.serviceWorker.controller),
    build: null, // the build whose files are saved (and serve this page, when controlled)
    next: null, // a newer build, saved and waiting
    message: null,
  };
  function set(state, extra = {}) {
    Object.assign(status, { state }, extra);
    if (note) note.textContent = STATES[state];
  }

  /** Ask a service worker that is active what it holds; "saved" once it holds every file. */
  function ask(sw) {
    return new Promise((resolve) => {
      const heard = (event) => {
        const m = event.data || {};
        if (m.type !== "offline-status" || event.source !== sw) return;
        navigator.serviceWorker.removeEventListener("message", heard);
        resolve(m);
      };
      navigator.serviceWorker.addEventListener("message", heard);
      sw.postMessage({ type: "status" });
    });
  }

  // The browser may find a new build while an earlier follow() still waits for an answer about
  // the old one: only the latest follow() says what is saved.
  let latest = 0;
  async function follow(registration) {
    const mine = ++latest;
    const sw = registration.installing || registration.waiting || registration.active;
    if (!sw) return;
    if (sw.state !== "activated") {
      set("saving");
      await new Promise((resolve) => {
        const check = () => {
          if (sw.state === "installed" || sw.state === "activated" || sw.state === "redundant") resolve();
        };
        sw.addEventListener("statechange", check);
        check();
      });
      if (mine !== latest) return;
      if (sw.state === "redundant") {
        set("failed", { message: "the new files could not all be saved (a file failed its check, or the network went away)" });
        return;
      }
    }
    // installed (waiting for the pages of the old build to close) or active: all files are saved
    const reply = await ask(sw);
    if (mine !== latest) return;
    if (!reply.build) return set("off"); // a site built without the file list (never served so)
    if (reply.held < reply.files) return set("failed", { message: `${reply.held} of ${reply.files} files saved` });
    const update = sw !== registration.active && Boolean(registration.active);
    set(update ? "update" : "saved", update ? { next: reply.build } : { build: reply.build });
  }

  async function start() {
    if (status.state !== "waiting") return status; // asked already
    if (!globalThis.navigator || !navigator.serviceWorker || !globalThis.isSecureContext) {
      set("off");
      return status;
    }
    set("checking");
    try {
      navigator.serviceWorker.startMessages();
      const registration = await navigator.serviceWorker.register(new URL("../sw.js", import.meta.url),
        { scope: new URL("../", import.meta.url).href });
      if (!registration) { // blocked by the browser (an automation setting)
        set("off");
        return status;
      }
      registration.addEventListener("updatefound", () => follow(registration));
      await follow(registration);
    } catch (err) {
      // not allowed here: a browser setting, a private window, or a frame on another site where
      // the browser keeps third-party storage apart. The page works online as before.
      set("off", { message: String(err && err.message) });
    }
    return status;
  }

  return { status, start };
}
