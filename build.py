#!/usr/bin/env python3
"""decodelab build: the one entry point for the whole project. `python3 build.py help` lists
the commands (the table COMMANDS below); the parts live in tools/."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tools import corpora, fetch as fetching, kernels, pretrained, site as sitelib, wheel as wheels
from tools.cache import UserCache
from tools.common import (ARTIFACTS_DIR, PACKAGE_DIR, PY_DIR, ROOT, BuildError, human,
                          module_from_file, rel, run,
                          say, sha256_file)
from tools.keys import Artifact, Stamps, module_files, restore, source_digests, store
from tools.keys import code_digests as content_digests

WEB_DIR = ROOT / "web"
STATIC_DIR = ROOT / "static"
DATA_DIR = ARTIFACTS_DIR / "data"
MODELS_DIR = ARTIFACTS_DIR / "models"
PAGE_WHEEL_DIR = ARTIFACTS_DIR / "pyodide"  # the page's wheel, code only
DIST_DIR = ROOT / "dist"  # the pip wheel, with the corpora and models
BUNDLED_DIR = PACKAGE_DIR / wheels.DATA_FOLDER  # the same data, for `pip install .`
TOOLS_DIR = ROOT / "tools"
CHROMIUM = Path("/usr/bin/chromium")


# --------------------------------------------------------------------------------------
# setup


def npm_packages_missing() -> list[str]:
    """Packages of package.json (dependencies and devDependencies) absent from node_modules."""
    meta = json.loads((ROOT / "package.json").read_text())
    wanted = {**meta.get("dependencies", {}), **meta.get("devDependencies", {})}
    return [n for n in wanted if not (ROOT / "node_modules" / n / "package.json").exists()]


def setup_npm() -> None:
    want = fetching.PYODIDE_VERSION
    found, missing = fetching.npm_pyodide_version(), npm_packages_missing()
    if found == want and not missing:
        say(f"setup: npm pyodide {want} present")
        return
    say(f"setup: npm pyodide is {found or 'missing'} (want {want}), missing: "
        f"{', '.join(missing) or 'none'}: running npm ci")
    if run(["npm", "ci", "--no-audit", "--no-fund"]).returncode != 0:
        raise BuildError("npm ci failed (see the output above)")
    if fetching.npm_pyodide_version() != want:
        raise BuildError(f"after npm ci, node_modules/pyodide is not {want}: "
                         "check package.json and package-lock.json")


def project_metadata() -> dict:
    path = ROOT / "pyproject.toml"
    try:
        return tomllib.loads(path.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"cannot read [project] from {rel(path)}: {exc}") from None


def test_requirements(group: str = "test") -> list[str]:
    """The project's dependencies plus an optional group from pyproject.toml: `test`, or
    `build` (what assembling the site needs: brotli, for the precompressed copies)."""
    project = project_metadata()
    try:
        return list(project.get("dependencies", [])) + project["optional-dependencies"][group]
    except KeyError:
        raise BuildError(f"pyproject.toml has no [project.optional-dependencies] {group}") from None


def requirement_name(requirement: str) -> str:
    return re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)


def setup_pip(group: str = "test") -> None:
    from importlib import metadata

    missing = []
    for req in test_requirements(group):
        try:
            metadata.version(requirement_name(req))
        except metadata.PackageNotFoundError:
            missing.append(req)
    if not missing:
        say(f"setup: Python {group} dependencies present")
        return
    say("setup: installing Python packages: " + ", ".join(missing))
    if run([sys.executable, "-m", "pip", "install", *missing]).returncode != 0:
        raise BuildError("pip install failed for: " + ", ".join(missing))


def setup_chromium() -> None:
    if CHROMIUM.exists():
        say(f"setup: {CHROMIUM} present")
        return
    say(f"setup: {CHROMIUM} missing: installing Debian's chromium with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        if run(cmd, env=env).returncode != 0:
            raise BuildError(f"{' '.join(cmd)} failed; install chromium to run the browser tests")


def setup(full: bool = True) -> None:
    setup_npm()
    if full:
        setup_pip()
        setup_chromium()
        kernels.setup_wasm_tools()


# --------------------------------------------------------------------------------------
# artifacts: corpora, models, the package's data folder


def report(artifact: Artifact, how: str) -> None:
    sizes = sum(p.stat().st_size for p in artifact.outputs if p.is_file())
    say(f"artifacts: {artifact.name}: {how} ({human(sizes)}, key {artifact.key[:12]})")


def corpus_artifact(name: str) -> Artifact:
    spec = corpora.SOURCES[name]
    return Artifact(f"corpus {name}", [DATA_DIR / f"{name}.txt", DATA_DIR / f"{name}.json"],
                    {"recipe": "corpus", "name": name,
                     "source": {"file": spec[2], "sha256": spec[3]},
                     "code": source_digests([TOOLS_DIR / "corpora.py"])})


def code_digests(modules, leave_out: Path | None = None) -> dict:
    """The syntax digests (tools/keys.py), pathless, of the files that importing `modules` loads:
    the code part of the key of whatever the build makes by running the package."""
    files = [p for p in module_files(PACKAGE_DIR, modules) if p != leave_out]
    return content_digests(files, PACKAGE_DIR.name)


def command_key(args) -> list:
    """A build step's command as its key holds it: the module it runs by its own name, not its
    place in the package (moving it trains nothing again, as for its code above)."""
    return [a.rpartition(".")[2] if a.startswith(PACKAGE_DIR.name + ".") else a for a in args]


# Corpora the package generates itself (from a seed, no download): name -> (module, the
# downloaded corpus it draws from). Running `python -m <module> corpus --names FILE --out
# FOLDER` writes <name>.txt and <name>.json there.
GENERATED = {"tasks": ("decodelab.core.tasks.data", "names")}


def generated_artifact(name: str) -> Artifact:
    module, source = GENERATED[name]
    command = ["-m", module, "corpus"]
    return Artifact(f"corpus {name}", [DATA_DIR / f"{name}.txt", DATA_DIR / f"{name}.json"],
                    {"recipe": "generated corpus", "args": command_key(command),
                     "names": sha256_file(DATA_DIR / f"{source}.txt"),
                     "code": code_digests((module, "decodelab.core.tokens.corpus", "decodelab.core.tasks.records"))},
                    command=command)


def package_env() -> dict:
    """The environment a build step runs the package in (py/ first on PYTHONPATH)."""
    paths = [str(PY_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def build_corpora(cache: UserCache, stamps: Stamps) -> dict[str, Path]:
    made = {}
    for name in corpora.SOURCES:
        artifact = corpus_artifact(name)
        how = restore(artifact, stamps, cache)
        if how is None:
            sdist = fetching.obtain_pypi(corpora.SOURCES[name], cache)
            with tempfile.TemporaryDirectory() as tmp:
                corpora.prepare(name, sdist, Path(tmp))
                store(artifact, Path(tmp), stamps, cache)
            how = "made"
        report(artifact, how)
        made[name] = artifact.outputs[0]
    for name, (_, source) in GENERATED.items():  # after the downloads they draw from
        artifact = generated_artifact(name)
        how = restore(artifact, stamps, cache)
        if how is None:
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [sys.executable, *artifact.command, "--names", str(made[source]),
                       "--out", tmp]
                if subprocess.run(cmd, cwd=ROOT, env=package_env()).returncode != 0:
                    raise BuildError(f"generating the {artifact.name} failed (see above)")
                store(artifact, Path(tmp), stamps, cache)
            how = "generated"
        report(artifact, how)
        made[name] = artifact.outputs[0]
    return made


# The modules a training loads: decodelab.core.models.train (its main() reads the corpus, and imports the
# bigram model when asked for one) and what they import at import time (tools/keys.py,
# module_files; the sessions, sampling and fields load only when a model generates, so they are
# not here). The recipes are data: a model's key holds its own recipe, not the file.
TRAIN_MODULES = {
    "bigram": ("decodelab.core.models.train", "decodelab.core.tokens.corpus", "decodelab.core.models.bigram"),
    "transformer": ("decodelab.core.models.train", "decodelab.core.tokens.corpus"),
}
RECIPES = PACKAGE_DIR / "core" / "models" / "recipes.py"
# (kind, dataset, tokenizer): "chars", or "bpe" for a model on the tokens of TOKENIZERS'
# merges. Longest first, so two cores finish soonest.
MODELS = (("transformer", "tasks", "bpe"), ("transformer", "prose", "bpe"),
          ("transformer", "prose", "chars"), ("transformer", "names", "chars"),
          ("bigram", "names", "chars"), ("bigram", "prose", "chars"), ("bigram", "prose", "bpe"),
          ("bigram", "tasks", "bpe"))


def model_name(kind: str, dataset: str, tokenizer: str) -> str:
    return f"{kind}-{dataset}" + ("" if tokenizer == "chars" else f"-{tokenizer}")


def training_recipe(dataset: str, tokenizer: str) -> dict:
    """A transformer's recipe (decodelab.core.models.recipes): its shape and training settings."""
    import dataclasses

    module = module_from_file(RECIPES)
    model, train = module.recipe(dataset, tokenizer)
    return {"model": model, "train": dataclasses.asdict(train)}


def numpy_version() -> str:
    """The numpy that trains (the build's own interpreter): another release can round a step
    differently, and a model trained with it comes out a little different."""
    from importlib import metadata

    return metadata.version("numpy")


def model_artifact(kind: str, dataset: str, tokenizer: str, data: Path) -> Artifact:
    """A trained model: the key covers what decides its weights and nothing else: the training
    command, the data (and tokenizer), the model's recipe, the numpy version, and the syntax of
    the code the training runs (tools/keys.py, code_digests: a comment, a docstring or an
    error message edited there trains nothing)."""
    modules = TRAIN_MODULES[kind] + (() if tokenizer == "chars" else ("decodelab.core.tokens.bpe",))
    inputs = {"recipe": "model", "args": command_key(train_args(kind, dataset)),
              "numpy": numpy_version(),
              "data": sha256_file(data), "code": code_digests(modules, leave_out=RECIPES)}
    if kind == "transformer":
        inputs["settings"] = training_recipe(dataset, tokenizer)
    if tokenizer != "chars":
        inputs["tokenizer"] = sha256_file(MODELS_DIR / f"{tokenizer}-{dataset}.npz")
    name = model_name(kind, dataset, tokenizer)
    return Artifact(f"model {name}", [MODELS_DIR / f"{name}.npz"], inputs)


def train_args(kind: str, dataset: str) -> list[str]:
    return ["-m", "decodelab.core.models.train", "--model", kind, "--dataset", dataset]


def train_models(corpus_files: dict[str, Path], cache: UserCache, stamps: Stamps) -> list[Path]:
    """The models: each up to date, copied from the per-user cache, or trained by
    `python -m decodelab.core.models.train`, one process per model (each on one BLAS thread: on two cores
    two processes are faster and steadier than one process with two threads)."""
    todo = []
    for kind, dataset, tokenizer in MODELS:
        artifact = model_artifact(kind, dataset, tokenizer, corpus_files[dataset])
        how = restore(artifact, stamps, cache)
        if how is None:
            todo.append((artifact, kind, dataset, tokenizer))
        else:
            report(artifact, how)
    if todo:
        say(f"artifacts: training {', '.join(job[0].name for job in todo)} "
            f"({min(len(todo), os.cpu_count() or 1)} at a time)")
        env = dict(package_env(), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        with tempfile.TemporaryDirectory() as tmp, \
                ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            def train(artifact, kind, dataset, tokenizer):
                out = Path(tmp) / artifact.outputs[0].name
                cmd = [sys.executable, *train_args(kind, dataset), "--data",
                       str(corpus_files[dataset]), "--out", str(out)]
                if tokenizer != "chars":
                    cmd += ["--tokenizer", str(MODELS_DIR / f"{tokenizer}-{dataset}.npz")]
                return subprocess.run(cmd, cwd=ROOT, env=env).returncode

            jobs = {pool.submit(train, *job): job[0] for job in todo}
            failed = []
            for done in as_completed(jobs):
                artifact = jobs[done]
                if done.result() != 0:
                    failed.append(artifact.name)
                    continue
                store(artifact, Path(tmp), stamps, cache)
                report(artifact, "trained")
        if failed:
            raise BuildError(f"training failed for {', '.join(failed)} (see the output above)")
    return [MODELS_DIR / f"{model_name(*m)}.npz" for m in MODELS]


# The BPE tokenizers made at build time, in order: dataset -> None for merges learned from the
# corpus's training split, or the dataset whose merges it reuses with the special tokens of
# `decodelab.core.tasks.data` added (the tasks data reads the prose's tokens plus its six markers).
TOKENIZERS = {"prose": None, "tasks": "prose"}
TOKENIZER_MODULES = ("decodelab.core.tokens.bpe", "decodelab.core.tokens.corpus")


def tokenizer_artifact(dataset: str, data: Path) -> Artifact:
    base = TOKENIZERS[dataset]
    if base is None:
        code = code_digests(TOKENIZER_MODULES)
        command = ["-m", "decodelab.core.tokens.bpe", "--dataset", dataset]
        inputs = {"recipe": "tokenizer", "data": sha256_file(data)}
    else:
        code = code_digests(("decodelab.core.tasks.data", "decodelab.core.tokens.bpe"))
        command = ["-m", "decodelab.core.tasks.data", "tokenizer"]
        inputs = {"recipe": "tokenizer with special tokens",
                  "base": sha256_file(MODELS_DIR / f"bpe-{base}.npz")}
    return Artifact(f"tokenizer bpe-{dataset}", [MODELS_DIR / f"bpe-{dataset}.npz"],
                    {**inputs, "args": command_key(command), "code": code}, command=command)


def train_tokenizers(corpus_files: dict[str, Path], cache: UserCache, stamps: Stamps) -> list[Path]:
    """The BPE merges of each dataset in TOKENIZERS (a few seconds each)."""
    made = []
    for dataset, base in TOKENIZERS.items():
        artifact = tokenizer_artifact(dataset, corpus_files[dataset])
        how = restore(artifact, stamps, cache)
        if how is None:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / artifact.outputs[0].name
                source = ["--data", str(corpus_files[dataset])] if base is None else \
                    ["--merges", str(MODELS_DIR / f"bpe-{base}.npz")]
                cmd = [sys.executable, *artifact.command, *source, "--out", str(out)]
                if subprocess.run(cmd, cwd=ROOT, env=package_env()).returncode != 0:
                    raise BuildError(f"learning the {artifact.name} failed (see the output above)")
                store(artifact, Path(tmp), stamps, cache)
            how = "learned"
        report(artifact, how)
        made.append(artifact.outputs[0])
    return made


def asset_files() -> list[tuple[str, Path]]:
    """The corpora and models as (path inside an assets folder, file), in a fixed order."""
    found = []
    for pattern in ("data/*.txt", "data/*.json", "models/*.npz"):
        found += [(p.relative_to(ARTIFACTS_DIR).as_posix(), p)
                  for p in sorted(ARTIFACTS_DIR.glob(pattern))]
    if not any(path.endswith(".txt") for path, _ in found):
        raise BuildError(f"{rel(DATA_DIR)}/ has no corpora: run `python3 build.py artifacts`")
    return found


def bundle_data(stamps: Stamps) -> Path:
    """py/decodelab/bundled/: the corpora and models inside the package folder (git-ignored),
    so `pip install .` from a built checkout installs them as package data too."""
    files = asset_files()
    artifact = Artifact(f"package data {rel(BUNDLED_DIR)}/",
                        [BUNDLED_DIR / path for path, _ in files],
                        {"recipe": "copy",
                         "files": source_digests([p for _, p in files], ARTIFACTS_DIR)},
                        cached=False)
    how = restore(artifact, stamps, None)
    if how is None:
        shutil.rmtree(BUNDLED_DIR, ignore_errors=True)
        with tempfile.TemporaryDirectory() as tmp:
            for _, src in files:
                shutil.copyfile(src, Path(tmp) / src.name)
            store(artifact, Path(tmp), stamps, None)
        how = "copied"
    report(artifact, how)
    return BUNDLED_DIR


def artifacts(cache: UserCache, stamps: Stamps) -> list[Path]:
    corpus_files = build_corpora(cache, stamps)
    tokenizers = train_tokenizers(corpus_files, cache, stamps)
    models = train_models(corpus_files, cache, stamps)
    bundle_data(stamps)
    kernels.build_native()  # the package's kernels here, and the page's side module
    kernels.build_wasm(ARTIFACTS_DIR / "kernels")
    gguf = pretrained.obtain_gguf(cache)  # the real model: downloaded once, kept by sha256
    say(f"artifacts: pretrained smollm2: {rel(gguf) if ROOT in gguf.parents else gguf} "
        f"({human(gguf.stat().st_size)})")
    return [*corpus_files.values(), *tokenizers, *models]


# --------------------------------------------------------------------------------------
# wheels


def wheel_artifact(name: str, folder: Path, project: dict, data: list) -> Artifact:
    filename = f"{re.sub(r'[-_.]+', '_', project['name']).lower()}-{project['version']}" \
               "-py3-none-any.whl"
    return Artifact(name, [folder / filename],
                    {"recipe": "wheel", "project": project,
                     "code": source_digests(wheels.package_files(PACKAGE_DIR)),
                     "data": source_digests([p for _, p in data], ARTIFACTS_DIR),
                     "builder": source_digests([TOOLS_DIR / "wheel.py"])},
                    cached=False)


def make_wheel(artifact: Artifact, project: dict, data: list, stamps: Stamps) -> Path:
    target = artifact.outputs[0]
    how = restore(artifact, stamps, None)
    if how is None:
        filename, content = wheels.wheel_bytes(
            PACKAGE_DIR, project, [(path, src.read_bytes()) for path, src in data])
        if filename != target.name:
            raise BuildError(f"wheel name {filename} is not the expected {target.name}")
        for old in target.parent.glob("*.whl"):
            old.unlink()
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / filename).write_bytes(content)
            store(artifact, Path(tmp), stamps, None)
        how = "built"
    say(f"wheel: {rel(target)}: {how} ({human(target.stat().st_size)}, "
        f"sha256 {sha256_file(target)})")
    return target


def build_wheels(stamps: Stamps) -> tuple[Path, Path]:
    """The page's wheel (code only) and pip's wheel (code, corpora and models)."""
    project = project_metadata()
    if not (PACKAGE_DIR / "__init__.py").exists():
        raise BuildError(f"{rel(PACKAGE_DIR)}/__init__.py is missing")
    page = make_wheel(wheel_artifact("page wheel", PAGE_WHEEL_DIR, project, []), project, [],
                      stamps)
    data = asset_files()
    pip = make_wheel(wheel_artifact("pip wheel", DIST_DIR, project, data), project, data, stamps)
    return page, pip


# --------------------------------------------------------------------------------------
# site


def site_models(cache: UserCache, with_model: bool) -> list[dict]:
    """The real model's file for models/ (none when the site is built without it)."""
    if not with_model:
        return []
    files = pretrained.FILES
    return [{"model": "smollm2", "path": str(pretrained.obtain_gguf(cache)),
             "sha256": files.GGUF_SHA256, "credit": files.CREDIT, "license": "Apache-2.0"}]


def site(runtime: list[Path], page_wheel: Path, stamps: Stamps, models: list[dict] = ()) -> Path:
    """static/, made afresh in a folder beside it and swapped in, when its inputs changed."""
    if not WEB_DIR.is_dir():
        raise BuildError(f"{rel(WEB_DIR)}/ is missing")
    # the lesson files, and the kernels' side module where it was built (the page loads it
    # into Python's heap; without it the quantized engine runs in numpy and says so)
    module = kernels.wasm_module(ARTIFACTS_DIR / "kernels")
    assets = asset_files() + ([(f"kernels/{module.name}", module)] if module else [])
    web = [p for p in WEB_DIR.rglob("*")
           if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")]
    inputs = {"recipe": "site", "web": source_digests(web, WEB_DIR),
              "runtime": {p.name: sha256_file(p) for p in runtime},
              "wheel": {page_wheel.name: sha256_file(page_wheel)},
              "assets": source_digests([p for _, p in assets], ARTIFACTS_DIR),
              "models": [{k: m[k] for k in ("model", "sha256", "credit")} for m in models],
              "code": source_digests([TOOLS_DIR / "site.py", TOOLS_DIR / "page.py"])}
    artifact = Artifact("site", [STATIC_DIR], inputs, cached=False)
    if stamps.fresh(artifact.outputs, artifact.key):
        say(f"site: {rel(STATIC_DIR)}/ up to date, {sitelib.describe(sitelib.weight(STATIC_DIR))}")
        return STATIC_DIR
    lock = sitelib.site_lock(fetching.npm_lock(),
                             sitelib.lock_entry(page_wheel, project_metadata()))
    fresh = Path(tempfile.mkdtemp(dir=ROOT, prefix=".static-"))
    old = ROOT / f".static-old-{os.getpid()}"
    try:
        shutil.rmtree(fresh)
        sizes = sitelib.assemble(fresh, WEB_DIR, runtime, page_wheel, lock, assets, models)
        if STATIC_DIR.exists():
            STATIC_DIR.rename(old)
        fresh.rename(STATIC_DIR)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    stamps.record(artifact.outputs, artifact.key)
    say(f"site: {rel(STATIC_DIR)}/ built, {sitelib.describe(sizes)}")
    return STATIC_DIR


def build(npm: bool = True, with_model: bool = True) -> Path:
    if npm:
        setup_npm()
    setup_pip("build")
    cache, stamps = UserCache(), Stamps()
    say(f"cache: {cache.root}")
    runtime = fetching.fetch(cache)
    artifacts(cache, stamps)
    page_wheel, _ = build_wheels(stamps)
    return site(runtime, page_wheel, stamps, site_models(cache, with_model))


# --------------------------------------------------------------------------------------
# serve


MIME_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".whl": "application/octet-stream",
    ".zip": "application/octet-stream",
    ".npz": "application/octet-stream",
    ".gguf": "application/octet-stream",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".map": "application/json",
}


# The Python worker's Content-Security-Policy (the page's own is a <meta> in index.html and
# embed.html): its own scripts, WebAssembly for Pyodide, fetches from its own origin only.
WORKER_CSP = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'"


class StaticHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder with the MIME types the page needs and no caching."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    quiet = False
    isolated = False

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        if self.path.split("?", 1)[0].endswith("/worker.js"):  # a worker has no <meta> for its CSP
            self.send_header("Content-Security-Policy", WORKER_CSP)
        # Public files: a course page on another origin may load element.js as a module.
        self.send_header("Access-Control-Allow-Origin", "*")
        if self.isolated:
            # Cross-origin isolation: the page may share memory with its worker, so a stuck
            # Python call can be interrupted (supervisor.js). Everything it loads is its own;
            # CORP lets an isolated course page on another origin embed it all the same.
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "cross-origin")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)


# A browser that goes away in the middle of a response (a reload, a closed tab, a test that
# ends) leaves the server writing to a closed connection; that is normal, not an error.
DROPPED_CONNECTION = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class StaticServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], DROPPED_CONNECTION):
            return
        super().handle_error(request, client_address)  # anything else prints its traceback


def make_server(root, host: str = "127.0.0.1", port: int = 0, quiet: bool = False,
                isolated: bool = False):
    """An HTTP server for `root` (not yet serving; call serve_forever). Port 0 picks a
    free port: read it from server.server_address. isolated: send the headers that make the
    page cross-origin isolated (most static hosts send none; the page works either way)."""
    handler = type("Handler", (StaticHandler,), {"quiet": quiet, "isolated": isolated})
    handler = functools.partial(handler, directory=str(root))
    return StaticServer((host, port), handler)


# --------------------------------------------------------------------------------------
# commands


def parse_serve_args(args: list[str]):
    import argparse

    parser = argparse.ArgumentParser(prog="build.py serve")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(WITHOUT_MODEL, action="store_true", help=WITHOUT_MODEL_HELP)
    return parser.parse_args(args)


# The site carries the real model (98 MB in models/) unless built with this option; its page then
# says the model is not on this site, and every other model works as before.
WITHOUT_MODEL = "--without-real-model"
WITHOUT_MODEL_HELP = "leave the real model's 98 MB file out of static/models/"


def with_model(args: list[str]) -> bool:
    unknown = [a for a in args if a != WITHOUT_MODEL]
    if unknown:
        raise BuildError(f"unknown option {unknown[0]}; the one option here is {WITHOUT_MODEL}")
    return WITHOUT_MODEL not in args


def cmd_setup(args: list[str]) -> int:
    setup(full=True)
    return 0


def cmd_fetch(args: list[str]) -> int:
    fetching.fetch(UserCache())
    return 0


def cmd_artifacts(args: list[str]) -> int:
    artifacts(UserCache(), Stamps())
    return 0


def cmd_wheel(args: list[str]) -> int:
    stamps = Stamps()
    artifacts(UserCache(), stamps)
    build_wheels(stamps)
    return 0


def cmd_site(args: list[str]) -> int:
    build(npm=False, with_model=with_model(args))
    return 0


def cmd_build(args: list[str]) -> int:
    build(with_model=with_model(args))
    return 0


def cmd_serve(args: list[str]) -> int:
    options = parse_serve_args(args)
    build(with_model=not options.without_real_model)
    try:
        server = make_server(STATIC_DIR, options.host, options.port, isolated=True)
    except OSError as exc:
        raise BuildError(f"cannot listen on {options.host}:{options.port}: "
                         f"{exc.strerror or exc}") from None
    bound_host, bound_port = server.server_address[:2]
    say(f"serve: http://{bound_host}:{bound_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say("serve: stopped")
    finally:
        server.server_close()
    return 0


# The inner loop's tier: the node tests and the native tests, without the browser, the installed
# wheel, the models' held-out bars or the reference libraries (pyproject.toml's markers).
FAST_TIER = "not browser and not install and not quality and not reference"


def pytest_runs(args: list[str]) -> list[list[str]]:
    """The pytest commands of `build.py test [args]`, run one after the other. Native tests run
    on every core (pytest-xdist; each worker takes whole files, so a module's loaded model or
    booted page is made once), and so do the browser tests, except those marked `alone`
    (they time the page or wait on a watchdog: two Chromiums on two cores would starve each
    other's deadlines), which run last, one at a time. `--fast` (ours, not pytest's) keeps to
    FAST_TIER; other arguments go to one pytest run as they are. Each prints its 20 slowest."""
    pytest = [sys.executable, "-m", "pytest", "--durations=20"]
    parallel = ["-n", "auto", "--dist", "loadfile"]
    rest = [a for a in args if a != "--fast"]
    if "--fast" in args:
        return [pytest + parallel + ["-m", FAST_TIER] + rest]
    if rest:
        return [pytest + parallel + rest]
    return [pytest + parallel + ["-m", "not browser"],
            pytest + parallel + ["-m", "browser and not alone"],
            pytest + ["-m", "browser and alone"]]


def testing_env() -> dict:
    """The environment of the test runs: one BLAS and OpenMP thread per process (each pytest
    worker has a core of its own; a second thread each only spins against the other worker:
    greedy answers of the tasks model took 2.5 times as long with it on the 2-core machine),
    as the training and the benchmark run. A value set by the caller is kept."""
    return {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            **os.environ}


def cmd_test(args: list[str]) -> int:
    if "--fast" in args:  # no browser: no Chromium, no site; the models all the same
        setup(full=False)
        setup_pip()
        artifacts(UserCache(), Stamps())
    else:
        setup(full=True)
        build(npm=False)
    for cmd in pytest_runs(args):
        say("test: " + " ".join(["python3", *cmd[1:]]))
        status = subprocess.run(cmd, cwd=ROOT, env=testing_env()).returncode
        if status == 5:
            say("test: no tests were collected; that counts as a failure")
            return 1
        if status != 0:
            return status
    return 0


def cmd_bench(args: list[str]) -> int:
    if "--real" in args:  # the real model's rows, natively (no browser, no site)
        setup(full=False)
        artifacts(UserCache(), Stamps())
        rest = [a for a in args if a != "--real"]
        return run([sys.executable, str(ROOT / "tests" / "benchmark_real.py"), *rest]).returncode
    setup(full=True)
    build(npm=False)
    return run([sys.executable, str(ROOT / "tests" / "benchmark.py"), *args]).returncode


def cmd_help(args: list[str]) -> int:
    print(help_text())
    return 0


COMMANDS = {
    "setup": (cmd_setup, "make a fresh machine ready: `npm ci` when node_modules lacks a "
                         "package or pyodide is not the pinned version; the Python test "
                         "dependencies (pyproject.toml) and Debian's chromium when missing"),
    "fetch": (cmd_fetch, "the Pyodide runtime (npm) and the numpy, micropip and packaging "
                         "wheels, verified by sha256, into the download cache"),
    "artifacts": (cmd_artifacts, "the corpora (artifacts/data/: names and prose downloaded, "
                                 "tasks generated), the BPE tokenizers of prose and tasks, the "
                                 "eight models (artifacts/models/) and their copy in "
                                 "py/decodelab/bundled/"),
    "wheel": (cmd_wheel, "artifacts, then the two wheels: the page's, code only "
                         "(artifacts/pyodide/), and pip's, with the corpora and models (dist/)"),
    "site": (cmd_site, "fetch, artifacts, wheel, then static/: the page, the runtime, the "
                       "wheels, a trimmed pyodide-lock.json, the assets and their manifest, "
                       "and the real model in models/ (" + WITHOUT_MODEL + ": left out)"),
    "build": (cmd_build, "(the default) setup's npm part, then site (" + WITHOUT_MODEL + ")"),
    "serve": (cmd_serve, "build, then serve static/ over HTTP (--port 8000, --host 127.0.0.1, "
                         + WITHOUT_MODEL + ")"),
    "test": (cmd_test, "setup, build, then every test tier: the native tests on every core, "
                       "then the browser tier (with [args]: one `python3 -m pytest -n auto "
                       "[args]`); --fast: node and native tests only, no browser, install, "
                       "quality or reference tier"),
    "bench": (cmd_bench, "setup, build, then tests/benchmark.py [--quick] [--json FILE]; "
                         "--real: the real model's rows alone, natively"),
    "help": (cmd_help, "this text"),
}

HELP_FOOTER = """\
Every artifact (corpus, model, wheel, package data, site) is up to date exactly when the
sha256 key of its inputs (data, configuration, the code that decides it) equals the key
stored with it in artifacts/keys.json. Downloads (by sha256) and the corpora and trained
models (by key) are kept in a per-user cache outside the checkout: $DECODELAB_CACHE, else
$XDG_CACHE_HOME/decodelab, else ~/.cache/decodelab. Where each part comes from: tools/."""


def help_text() -> str:
    import textwrap

    lines = ["Usage: python3 build.py [command] [args]", "", "Commands:"]
    for name, (_, text) in COMMANDS.items():
        wrapped = textwrap.wrap(text, 78, initial_indent=f"  {name:<10} ",
                                subsequent_indent=" " * 13)
        lines += wrapped
    return "\n".join(lines + ["", HELP_FOOTER])


def main(argv: list[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("build", [])
    if command in ("-h", "--help"):
        command = "help"
    if command not in COMMANDS:
        print(f"build.py: unknown command {command!r}; commands: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    try:
        return COMMANDS[command][0](args)
    except BuildError as exc:
        print(f"build.py {command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
