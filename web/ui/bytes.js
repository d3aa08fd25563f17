// Bytes in words, the one way the page says them: binary units with their own names (KiB, MiB,
// GiB: 1 KiB is 1,024 bytes), as memory is counted, as the lesson's KV-cache arithmetic teaches,
// and as Python says a size (decodelab's limits are whole MiB). A file's size, a download's
// progress and a cache's memory are all said this way, so two numbers in one sentence compare.
// Pure: the worker uses it too.

const UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/** The power of 1,024 a size is said in: 131072 -> 1 (KiB). */
function unitOf(n) {
  let i = 0;
  while (n >= 1024 ** (i + 1) && i < UNITS.length - 1) i += 1;
  return i;
}

/** Bytes in binary units: 131072 -> "128 KiB", 98362432 -> "93.8 MiB" (one decimal under 100). */
export function bytes(n) {
  if (n == null || !Number.isFinite(n)) return "–";
  const i = unitOf(n);
  if (i === 0) return `${Math.round(n).toLocaleString("en")} ${n === 1 ? "byte" : "bytes"}`;
  const v = n / 1024 ** i;
  const shown = v >= 100 || Number.isInteger(v) ? Math.round(v).toLocaleString("en") : v.toFixed(1);
  return `${shown} ${UNITS[i]}`;
}

/** A part of a whole, both in the whole's unit with one decimal: "6.1 of 16.9 MiB". */
export function bytesOf(part, whole) {
  const i = Math.max(1, unitOf(whole));
  const say = (n) => (n / 1024 ** i).toFixed(1);
  return `${say(part)} of ${say(whole)} ${UNITS[i]}`;
}
