// The address and the settings as the form holds them (web/state/query.js, web/state/settings.js):
// what a link gives, the page's own parameters, and links written back. No document needed.

import assert from "node:assert/strict";
import { test } from "node:test";

import { originOf, panelFromQuery, parseBool, pyRepr, queryValues, settingsFromQuery, viewFromQuery } from "../../web/state/query.js";
import { countChanged, fieldDefaults, formValue, forPython, settingsQuery, splitLines } from "../../web/state/settings.js";

const SPECS = { seed: { name: "seed", kind: "int", label: "Seed", allowed: "a whole number" }, stop: { name: "stop", kind: "lines", label: "Stop strings" }, greedy: { name: "greedy", kind: "bool" } };

test("a link's settings: repeated stop strings, a name given twice, unknown names", () => {
  const values = queryValues("?seed=3&stop=a&stop=&stop=b&seed=4&colour=red&theme=dark");
  const { raw, errors } = settingsFromQuery(values, ["seed", "stop"], SPECS);
  assert.deepEqual(raw, { stop: ["a", "b"] }); // an empty stop line is no stop string
  assert.deepEqual(errors.map((e) => e.field), ["seed", "colour"]);
  assert.match(errors[0].message, /Seed is given 2 times in the link/);
  assert.match(errors[1].message, /Unknown setting 'colour' in the link; known settings are seed, stop\./);
});

test("the page's own parameters, each checked with its allowed values in words", () => {
  const { view, errors } = viewFromQuery(queryValues("?theme=DARK&embed=1&lazy=false&panels=text,nope&controls=Top-K&host=https://a.org/,ftp://b"), ["text", "inspector"], ["top_k"], null);
  assert.equal(view.theme, "dark");
  assert.equal(view.embed, true);
  assert.equal(view.lazy, "none");
  assert.deepEqual(view.panels, ["text"]);
  assert.deepEqual(view.controls, ["top_k"]);
  assert.deepEqual(view.hosts, ["https://a.org"]);
  assert.deepEqual(errors.map((e) => e.field).sort(), ["host", "panels"]);
});

test("origins, yes and no, and Python's repr of a string", () => {
  assert.equal(originOf("https://course.example.org/"), "https://course.example.org");
  assert.equal(originOf("https://a.org/path"), null);
  assert.equal(originOf("javascript:alert(1)"), null);
  assert.deepEqual(["on", "YES", "1", "0", "off", "", "maybe"].map(parseBool), [true, true, true, false, false, false, null]);
  assert.equal(pyRepr("it's"), `"it's"`);
  assert.equal(pyRepr("a\nb"), "'a\\nb'");
});

test("values as the controls hold them, and as Python reads them", () => {
  assert.equal(formValue("int", 3), "3");
  assert.equal(formValue("float", 0.8), "0.8");
  assert.equal(formValue("text", null), "");
  assert.equal(formValue("bool", 1), true);
  assert.equal(formValue("lines", ["a", "b"]), "a\nb");
  assert.deepEqual(splitLines("a\r\n\nb\n"), ["a", "b"]);
  assert.deepEqual(forPython({ seed: "3", stop: "x\n\ny" }, SPECS), { seed: "3", stop: ["x", "y"] });
  assert.equal(countChanged({ seed: " 42 ", stop: "", greedy: true }, { seed: 42, stop: [], greedy: false }, ["seed", "stop", "greedy"], SPECS), 1);
});

test("a panel's fields at Python's defaults, as its controls show them", () => {
  const fields = [
    { name: "requests", kind: "int", default: 16 },
    { name: "memory_blocks", kind: "int", default: null },
    { name: "workload", kind: "lines", default: [] },
    { name: "seed", kind: "int", default: 42 },
  ];
  assert.deepEqual(fieldDefaults(fields, ["requests", "memory_blocks", "workload"]), { requests: "16", memory_blocks: "", workload: "" });
});

test("a link to the settings, in the table's order, the page's parameters last", () => {
  const q = settingsQuery({ stop: ["a b", "c"], seed: 3, greedy: false }, ["seed", "greedy", "stop"], { run: "true", theme: null });
  assert.equal(q, "seed=3&greedy=false&stop=a+b&stop=c&run=true");
});

test("a search panel's own settings in a link are no unknown names, and its panel reads them", () => {
  const values = queryValues("?seed=3&num_beams=6&num_beams=7&draft=bigram&beams=2");
  const { raw, errors } = settingsFromQuery(values, ["seed"], SPECS, ["num_beams", "num_return_sequences", "draft"]);
  assert.deepEqual(raw, { seed: "3" });
  assert.deepEqual(errors.map((e) => e.field), ["beams"]); // a misspelt one is still named
  assert.deepEqual(panelFromQuery(values, ["num_beams", "num_return_sequences"]), { num_beams: "7" });
  assert.deepEqual(panelFromQuery(values, ["draft"]), { draft: "bigram" });
});
