// The course's pure rules, apart from the page so node can test them: which chapter an address
// opens, the chapters before and after one, what the map says of a chapter's progress, and the
// progress kept from an earlier visit read back without trusting it.

/** The chapter an address's fragment opens: a chapter's own name ("#sampling"), or the chapter
 * that holds the element of that id ("#kvcache" -> "cache"), with that element as the target.
 * chapterOf(id) -> the name of the chapter holding the element with that id, or null. */
export function resolveHash(hash, names, chapterOf) {
  let id = String(hash || "").replace(/^#/, "");
  try {
    id = decodeURIComponent(id);
  } catch {
    // a broken escape ("#%E2") names nothing: the first chapter
  }
  if (!id) return { chapter: names[0], target: null };
  if (names.includes(id)) return { chapter: id, target: null };
  const holder = chapterOf(id);
  return holder ? { chapter: holder, target: id } : { chapter: names[0], target: null };
}

/** The chapters before and after `name`: {prev, next}, each a name or null. */
export function neighbours(names, name) {
  const i = names.indexOf(name);
  return { prev: i > 0 ? names[i - 1] : null, next: i >= 0 && i < names.length - 1 ? names[i + 1] : null };
}

/** What the map says of a chapter: {mark, words} from its suggestions and whether it was seen. */
export function chapterProgress(tries, tried, seen) {
  const done = tries.filter((id) => tried.includes(id)).length;
  if (tries.length && done === tries.length) return { mark: "done", words: `all ${tries.length} tried` };
  if (done) return { mark: "started", words: `${done} of ${tries.length} tried` };
  if (seen) return { mark: "seen", words: tries.length ? `read, ${tries.length} to try` : "read" };
  return { mark: "new", words: tries.length ? `${tries.length} to try` : "" };
}

/** The progress kept by an earlier visit ({seen, tried}), keeping only names this page knows:
 * anything else in storage (an older page, another site's data, a broken string) is dropped. */
export function readKept(text, chapterNames, tryIds) {
  let kept;
  try {
    kept = JSON.parse(text);
  } catch {
    return { seen: [], tried: [] };
  }
  const pick = (list, known) => (Array.isArray(list) ? list.filter((x) => known.includes(x)) : []);
  if (!kept || typeof kept !== "object") return { seen: [], tried: [] };
  return { seen: pick(kept.seen, chapterNames), tried: pick(kept.tried, tryIds) };
}
