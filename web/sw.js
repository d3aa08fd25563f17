// The service worker: after a first visit the lesson opens with no network at all.
//
// The build writes the list below: every file of the site with its SHA-256 (the same digests
// integrity.json and the assets' manifest.json hold), and BUILD, a digest of that whole list.
// So a new build is a new service worker, byte for byte, and the browser installs it beside the
// old one. Here, in the template, BUILD is null: such a worker saves and serves nothing, and the
// page (offline.js) says nothing of saving.
//
// - Install: every file is fetched with its integrity value (a changed or broken file fails the
//   fetch) into a cache of its own for this build. Any failure fails the install: the old build
//   stays in charge, whole.
// - Fetch: a request for one of the site's files is answered from this build's cache; anything
//   else goes to the network as usual. A page keeps the service worker it started with, so all
//   of its files, its worker's included, come from one build.
// - A new build waits until no page uses the old one. When a page is opened (a navigation) and a
//   new build is waiting, with no other page of the site open, the new build takes over and the
//   navigation is answered with a reload: the page then starts wholly from the new build.
// - Activate: the caches of this site's older builds are deleted.

const BUILD = null; // filled in by the build
const FILES = []; // [path relative to this file, "sha256-..."], filled in by the build

const PREFIX = "decodelab";
const SCOPE = new URL("./", self.location).href;
const CACHE = `${PREFIX} ${SCOPE} ${BUILD}`;
const PATHS = new Set(FILES.map(([path]) => path));
const PARALLEL = 4; // files fetched at once while installing

async function precache() {
  const cache = await caches.open(CACHE);
  const queue = [...FILES];
  const next = async () => {
    for (let item = queue.shift(); item; item = queue.shift()) {
      const [path, integrity] = item;
      const url = new URL(path, SCOPE).href;
      if (await cache.match(url)) continue; // an install that was interrupted: keep what it got
      const response = await fetch(url, { integrity, cache: "no-cache", credentials: "same-origin" });
      if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
      await cache.put(url, response);
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, next));
}

self.addEventListener("install", (event) => {
  event.waitUntil(precache().catch(async (err) => {
    await caches.delete(CACHE); // nothing half-made is left behind
    throw err;
  }));
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith(`${PREFIX} ${SCOPE} `) && name !== CACHE) await caches.delete(name);
    }
  })());
});

self.addEventListener("message", (event) => {
  const m = event.data || {};
  if (m.type === "take-over") self.skipWaiting();
  if (m.type === "status" && event.source) {
    event.waitUntil((async () => {
      const cache = await caches.open(CACHE);
      const held = (await cache.keys()).length;
      event.source.postMessage({ type: "offline-status", build: BUILD, files: FILES.length, held });
    })());
  }
});

/** The site's own path of a request in this scope ("" and "dir/" mean their index.html), or null. */
function sitePath(url) {
  if (!url.href.startsWith(SCOPE)) return null;
  let path = url.pathname.slice(new URL(SCOPE).pathname.length);
  if (path === "" || path.endsWith("/")) path += "index.html";
  return PATHS.has(path) ? path : null;
}

/** A new build is waiting and this navigation is the only page of the site: hand over to it. */
async function handOver(event) {
  const waiting = self.registration.waiting;
  if (!waiting || event.request.mode !== "navigate") return false;
  const pages = await self.clients.matchAll({ type: "window" });
  if (pages.length > 1) return false;
  const active = new Promise((resolve) => {
    const check = () => waiting.state === "activated" || waiting.state === "redundant";
    if (check()) return resolve();
    waiting.addEventListener("statechange", () => check() && resolve());
    setTimeout(resolve, 3000);
  });
  waiting.postMessage({ type: "take-over" });
  await active;
  return self.registration.active === waiting;
}

async function answer(event, path) {
  if (await handOver(event)) {
    return new Response("", { status: 200, headers: { Refresh: "0", "Content-Type": "text/html" } });
  }
  const cache = await caches.open(CACHE);
  const hit = await cache.match(new URL(path, SCOPE).href);
  return hit || fetch(event.request);
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET" || !BUILD) return;
  const url = new URL(request.url);
  const path = sitePath(url);
  if (path === null) return;
  event.respondWith(answer(event, path));
});
