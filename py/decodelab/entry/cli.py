"""``python -m decodelab``: the decoding engine from the command line, JSON on stdout.

    probs        the decoding rules on logits or probabilities you type
    generate     a run with a trained model, or the real one (--json prints the full trace)
    chat         a message to the real chat model, SmolLM2-135M-Instruct, in its chat template
    ask          a question to the tasks model: arithmetic with its calculator, or a card in JSON
    experiment   accuracy against temperature (the tasks model, or SmolLM2 on real questions)
    validity     the tasks model's card answers: valid JSON against budget and temperature
    kv-memory    KV-cache bytes for a model shape
    paged        a workload served from a paged cache: prefix tree, continuous batching
    cache-check  cached against recomputed logits, step by step
    eval         validation negative log-likelihood of a model on its dataset
    export-hf    a transformer, or SmolLM2, as a folder transformers loads (LlamaForCausalLM)
    import-hf    a Llama checkpoint saved by transformers, run in decodelab
    tokenize     text to token ids, with each token's text and bytes
    detokenize   token ids back to text

`--model smollm2` is the pretrained model read from its GGUF file (the build keeps it; `--gguf
PATH` reads another Llama-architecture GGUF): it brings its own tokenizer and training, so it
takes no --dataset or --tokenizer.

Every option is a field of `fields.FIELDS` (`--top-k` is the field top_k) with its help and its
checks, so a value the page refuses is refused here in the same words. Bad arguments exit with
status 2 and one line on stderr naming the option and what is allowed.
"""

import argparse
import json
import math
import os
import sys

from decodelab.core.rules.sampling import FILTER_NAMES
from decodelab.core.loops.search import kind as search_kind
from decodelab.core.rules.settings import NAMES as SETTING_NAMES
from decodelab.entry.command import CHAT_SETTINGS
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import FIELD_BY_NAME, PRETRAINED, check, encode, from_file, option, read
from decodelab.lesson.playground import RULES


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse, but every complaint is a single line (and the process exits with status 2)."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def add_fields(p, names, required=()):
    """One option per field: its help and allowed values from the table. Values stay raw text;
    the commands check them against the table. A command's own defaults are set after parsing
    (`with_defaults`)."""
    for name in names:
        f = FIELD_BY_NAME[name]
        text = f"{f.help} Allowed: {f.allowed()}.".replace("%", "%%")
        if f.kind == "bool" and f.default is True:
            p.add_argument(option(name), action=argparse.BooleanOptionalAction, default=None,
                           help=text)
        elif f.kind == "bool":
            p.add_argument(option(name), action="store_true", default=None, help=text)
        elif f.kind == "lines":
            p.add_argument(option(name), action="append", help=text + " Repeat for more.")
        else:
            p.add_argument(option(name), required=name in required, help=text)


def with_defaults(args):
    """The command's own defaults where an option was not given; a --gguf file is the model,
    so the default model does not apply beside it."""
    gguf = getattr(args, "gguf", None)
    for name, value in COMMANDS[args.command][3].items():
        if getattr(args, name, None) is None and not (name == "model" and gguf):
            setattr(args, name, value)
    return args


def given(args, names) -> dict:
    """The options the user actually gave, as raw values keyed by field name."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def library(args):
    from decodelab.core.library import Library

    return Library(args.assets, getattr(args, "gguf", None), getattr(args, "engine", "reference"))


def pretrained(args) -> bool:
    """Does the command run the pretrained model? (--model smollm2, or a --gguf file.) It
    brings its own tokenizer and training: --dataset and --tokenizer are refused with it."""
    if getattr(args, "gguf", None) is not None:
        if getattr(args, "model", None) is not None and not from_file(args.model):
            raise FieldError("gguf", f"--gguf is read as the pretrained model; leave --model "
                                     f"out or give --model {PRETRAINED[0]}.", also=("model",))
        args.model = PRETRAINED[0]
    if not from_file(getattr(args, "model", None)):
        return False
    for name in ("dataset", "tokenizer"):
        if getattr(args, name, None) is not None:
            raise FieldError(name, f"{name.capitalize()}: {PRETRAINED[0]} brings its own "
                                   "tokenizer and training; leave --dataset and --tokenizer "
                                   "out.", also=("model",))
    return True


def needs_dataset(args) -> None:
    """A model trained here is named by its dataset: --dataset is required with it."""
    if not pretrained(args) and getattr(args, "dataset", None) is None:
        raise FieldError("dataset", f"Dataset is required with a model trained here (or give "
                                    f"--model {PRETRAINED[0]}).")


def cmd_probs(args) -> dict:
    from decodelab.lesson.playground import probs

    out = probs(given(args, ("logits", "probs") + RULES))
    return {"probs": out["probs"], "kept": out["kept"]}


def cmd_generate(args):
    from decodelab.core.loops.generate import start

    pretrained(args)
    run = start(library(args), drawn(args, given(args, SETTING_NAMES))).run()
    return run.trace() if args.json else run


def drawn(args, raw: dict) -> dict:
    """raw, or a FieldError when the run draws tokens and no --seed was given: a sampled run is
    only repeatable from its seed. Greedy decoding and beam search draw nothing."""
    greedy = raw.get("greedy") or raw.get("temperature") in ("0", 0)
    if "seed" not in raw and not greedy and raw.get("strategy") != "beam":
        raise FieldError("seed", "Seed is required when tokens are drawn (a sampled run is "
                                 "repeatable from its seed); give --seed N, or --greedy.")
    return raw


def cmd_chat(args) -> dict:
    """One chat turn: the history, an optional system message and the new message rendered by
    the model's chat template, then a run from those ids. The trace, plus the rendered prompt's
    ids and the conversation with the answer appended (write it to a file for --history)."""
    from decodelab.pretrained.chat import start_turn

    if args.model is not None and not from_file(args.model) and args.gguf is None:
        raise FieldError("model", f"Model: chat needs a chat model; give --model "
                                  f"{PRETRAINED[0]} or leave it out.")
    args.model = PRETRAINED[0]
    pretrained(args)
    raw = drawn(args, given(args, CHAT_SETTINGS))
    messages = history(args.history) if args.history else []
    if args.system is not None:
        if messages:
            raise FieldError("system", "System: the history already holds the conversation; "
                                       "its first message is the system message, if any.")
        messages.append({"role": "system", "content": args.system})
    if args.message is None:
        raise FieldError("message", "Message is required: the text you say to the model.")
    messages.append({"role": "user", "content": args.message})
    # the page's chat's path (pretrained.chat.start_turn): the same checks, the same run
    run = start_turn(library(args), {**raw, "model": PRETRAINED[0]}, messages).run()
    return run.model.template.trace(run.trace(), run.chat)


def history(given) -> list:
    """The messages of an earlier chat (a JSON list, or chat's output with "messages"): from a
    file, or the JSON itself when the value starts with [ or { (what the page's command line
    for a chat turn gives, so that one line repeats the turn)."""
    inline = given.lstrip().startswith(("[", "{")) and not os.path.exists(given)
    try:
        if inline:
            data = json.loads(given)
        else:
            with open(given, encoding="utf-8") as fh:
                data = json.load(fh)
    except OSError as e:
        raise FieldError("history", f"History: cannot read {given} ({e.strerror}).") from None
    except ValueError as e:
        where = "the JSON given" if inline else given
        raise FieldError("history", f"History: {where} is not JSON ({e}).") from None
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise FieldError("history", "History must be a JSON list of messages, or the output of "
                                    "chat (its \"messages\").")
    return messages


CHECK = ("model", "dataset", "tokenizer", "prompt", "steps", "seed", "dtype")
MEMORY = ("layers", "kv_heads", "head_dim", "bytes_per_element", "tokens", "sequences")


def cmd_ask(args) -> dict:
    from decodelab.core.tasks.ask import ASK_SETTINGS, ask

    out = ask(library(args), given(args, ("question",) + ASK_SETTINGS))
    if not args.json:
        out.pop("trace")
    return out


def cmd_experiment(args) -> dict:
    from decodelab.lesson.accuracy import FIELDS, SETTINGS, AccuracyExperiment

    req = given(args, FIELDS)
    req["settings"] = given(args, SETTINGS)
    return AccuracyExperiment(library(args), req).run().result()


def cmd_validity(args) -> dict:
    from decodelab.lesson.shapes import FIELDS, SETTINGS, ValidityExperiment

    req = given(args, FIELDS)
    req["settings"] = given(args, SETTINGS)
    return ValidityExperiment(library(args), req).run().result()


def cmd_paged(args) -> dict:
    from decodelab.lesson.serving import FIELDS, serve

    needs_dataset(args)
    return serve(library(args), given(args, ("model",) + FIELDS))


def cmd_kv_memory(args) -> dict:
    from decodelab.core.models.kvcache import kv_cache_bytes

    return kv_cache_bytes(**read(given(args, MEMORY), MEMORY))


def cmd_cache_check(args) -> dict:
    import numpy as np

    from decodelab.core.models.checks import cache_check

    needs_dataset(args)
    values = read(given(args, CHECK), CHECK[:1] + CHECK[2:])
    if values["model"] == "bigram":
        raise FieldError("model", "Model must be transformer or smollm2: a bigram has no KV "
                                  "cache to check.")
    model = library(args).model(values["model"], args.dataset, values["tokenizer"])
    prompt_ids = encode(model.tokenizer, "prompt", values["prompt"])
    return cache_check(model, prompt_ids, values["steps"], values["seed"],
                       dtype=np.dtype(values["dtype"]))


def cmd_eval(args) -> dict:
    """Validation loss in nats per token (`val_nll`), and in units that do not depend on the
    tokenizer, so that tokenizers can be compared: nats per character and bits per byte. Each
    sequence's end counts as one character and one byte (the newline that ends it on disk), as
    it counts as one token (EOS); with one token per character the first two agree."""
    check("model", args.model)
    tokenizer = check("tokenizer", args.tokenizer or "chars")
    lib = library(args)
    corpus = lib.corpus(args.dataset)
    model = lib.model(args.model, args.dataset, tokenizer)
    val = model.nll(corpus.val)
    tokens = sum(len(model.tokenizer.encode(s)) + 1 for s in corpus.val)
    chars = sum(len(s) + 1 for s in corpus.val)
    text_bytes = sum(len(s.encode("utf-8")) + 1 for s in corpus.val)
    total = val * tokens  # nats over the whole validation split
    return {"val_nll": val, "nats_per_token": val, "nats_per_char": total / chars,
            "bits_per_byte": total / text_bytes / math.log(2), "params": model.n_params,
            "train_nll": model.nll(corpus.train), "model": args.model, "dataset": args.dataset,
            "tokenizer": tokenizer, "chars_per_token": chars / tokens,
            "val_sequences": len(corpus.val)}


def cmd_export_hf(args) -> dict:
    """The model as transformers' LlamaForCausalLM, with the run's settings as its
    generation_config.json (the settings are checked like generate's)."""
    from decodelab.core.interop import hf
    from decodelab.core.loops.generate import prepare
    from decodelab.core.interop.hftokenizer import tokenizer_files

    needs_dataset(args)
    if not args.out:
        raise FieldError("out", "Out must name the folder to write (it must not exist yet, or "
                                "be empty).")
    settings, model, _ = prepare(library(args), given(args, SETTING_NAMES), reads_prompt=False)
    written = hf.export(model, args.out, settings,
                        tokenizer_files(model.tokenizer, model.template))
    return {"out": str(args.out), "files": [p.name for p in written],
            "architecture": hf.ARCHITECTURE, "params": model.n_params,
            "config": hf.model_config(model)}


IMPORT_RUN = ("prompt", "seed", "temperature", "greedy", *FILTER_NAMES, "repetition_penalty",
              "order", "max_new_tokens", "min_new_tokens", "stop", "include_stop", "ignore_eos",
              "cache_check")


def cmd_import_hf(args) -> dict:
    """Generate with a Llama checkpoint folder (saved by transformers or by export-hf): with
    decodelab's tokenizer when the folder holds one decodelab wrote, else from token ids."""
    from decodelab.core.interop import hf
    from decodelab.core.loops.generate import Generation
    from decodelab.core.interop.hftokenizer import read_tokenizer
    from decodelab.core.rules.settings import validate
    from decodelab.core.models.transformer import TransformerModel

    cfg, params = hf.read_checkpoint(args.folder)
    tokenizer, what = read_tokenizer(args.folder, cfg.vocab_size)
    model = TransformerModel(cfg, params, tokenizer, info={"source": str(args.folder)})
    settings = validate({**given(args, IMPORT_RUN), "model": "transformer"})
    if args.ids is not None:
        if settings.prompt:
            raise FieldError("ids", "Give the prompt as text (--prompt) or as token ids (--ids), "
                                    "not both.", also=("prompt",))
        ids = read({"ids": args.ids}, ("ids",))["ids"]
        for i, token_id in enumerate(ids, 1):
            if token_id >= cfg.vocab_size:
                raise FieldError("ids", f"Token ids: entry {i} is {token_id}; this checkpoint's "
                                        f"ids go from 0 to {cfg.vocab_size - 1}.")
        run = Generation(model, settings, prompt=(ids, None)).run()
    else:
        run = Generation(model, settings).run()
    out = {"checkpoint": str(args.folder), "architecture": hf.ARCHITECTURE,
           "params": model.n_params, "tokenizer": what, "prompt_ids": list(run.prompt_ids),
           "ids": run.output_ids, "text": run.text, "finish_reason": run.finish_reason,
           "stop_reason": run.stop_reason}
    if args.json:
        out["steps"] = run.records
    return out


def tokenizer_of(args):
    """The tokenizer a tokenize or detokenize command names: the pretrained model's own, or a
    dataset's ("chars" or "bpe")."""
    if pretrained(args):
        return library(args).pretrained().tokenizer
    needs_dataset(args)
    return library(args).tokenizer(read(given(args, ("tokenizer",)), ("tokenizer",))["tokenizer"],
                                   args.dataset)


def cmd_tokenize(args) -> dict:
    tokens = tokenizer_of(args)
    values = read(given(args, ("text",)), ("text",))
    ids = encode(tokens, "text", values["text"])
    raw = [tokens.token_bytes(i) for i in ids]
    return {"ids": ids, "tokens": [tokens.label(i) for i in ids], "bytes": [b.hex() for b in raw]}


def cmd_detokenize(args) -> dict:
    tokens = tokenizer_of(args)
    values = read(given(args, ("ids",)), ("ids",))
    for i, token_id in enumerate(values["ids"], 1):
        if token_id >= tokens.vocab_size:
            raise FieldError("ids", f"Token ids: entry {i} is {token_id}; this tokenizer's ids go "
                                    f"from 0 to {tokens.vocab_size - 1}.")
    return {"text": tokens.decode(values["ids"])}


# name: (what it does, its fields, the fields it requires, defaults of its own, the command)
COMMANDS = {
    "probs": ("apply the decoding rules to numbers you type", ("logits", "probs") + RULES, (),
              {}, cmd_probs),
    "generate": ("generate with a trained model or the real one (--model smollm2)",
                 SETTING_NAMES, (), {}, cmd_generate),
    "chat": ("a message to the real chat model (SmolLM2-135M-Instruct) in its chat template",
             CHAT_SETTINGS, (), {}, cmd_chat),
    "ask": ("ask the tasks model a question: arithmetic (it may call a calculator) or a card "
            "(it answers in JSON)",
            ("question", "model", "seed", "temperature", "greedy", *FILTER_NAMES, "tools",
             "json_mode", "json_max_depth", "max_new_tokens"), ("question",), {},
            cmd_ask),
    "experiment": ("accuracy against temperature: the tasks model on held-out arithmetic, or "
                   "SmolLM2 (--model smollm2) on capitals and small sums",
                   ("temperatures", "questions", "samples_per_question", "model", "seed",
                    *FILTER_NAMES, "tools", "max_new_tokens"), (),
                   {}, cmd_experiment),
    "validity": ("valid JSON of the tasks model's card answers against token budget and "
                 "temperature, with and without JSON mode",
                 ("temperatures", "budgets", "cards", "samples_per_question", "model", "seed",
                  *FILTER_NAMES, "json_max_depth"), (), {}, cmd_validity),
    "kv-memory": ("KV-cache bytes for a model shape", MEMORY, MEMORY[:-1], {}, cmd_kv_memory),
    "paged": ("a workload (seeded, or --workload lines) served from a paged KV cache with a "
              "prefix tree and continuous batching: every request, the memory wasted, blocks "
              "shared, steps",
              ("model", "dataset", "tokenizer", "requests", "block_size", "seed",
               "memory_blocks", "max_running", "parallel_samples", "workload"), (),
              {"model": "transformer"}, cmd_paged),
    "cache-check": ("cached vs full-recompute logits, step by step", CHECK,
                    ("steps",), {"model": "transformer", "seed": "0"}, cmd_cache_check),
    "eval": ("validation NLL (nats per token) of a model", ("model", "dataset", "tokenizer"),
             ("dataset",),
             {"model": "bigram"}, cmd_eval),
    "export-hf": ("write a transformer, or SmolLM2 dequantized, as a folder Hugging Face "
                  "transformers loads (AutoModelForCausalLM.from_pretrained), the settings as its "
                  "generation config",
                  SETTING_NAMES, (), {"model": "transformer"}, cmd_export_hf),
    "import-hf": ("generate with a Llama checkpoint folder saved by transformers (or by "
                  "export-hf)", IMPORT_RUN, (), {}, cmd_import_hf),
    "tokenize": ("text to token ids", ("model", "dataset", "tokenizer", "text"), ("text",), {},
                 cmd_tokenize),
    "detokenize": ("token ids to text", ("model", "dataset", "tokenizer", "ids"), ("ids",), {},
                   cmd_detokenize),
}


def build_parser() -> Parser:
    parser = Parser(prog="decodelab", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (text, names, required, _, _) in COMMANDS.items():
        p = sub.add_parser(name, help=text)
        add_fields(p, names, required)
        if name == "generate":
            p.add_argument("--json", action="store_true", help="print the whole trace as JSON")
        if name == "ask":
            p.add_argument("--json", action="store_true", help="include the whole trace")
        if name in ("experiment", "validity", "paged"):
            p.add_argument("--json", action="store_true", help="JSON (the only output form)")
        if name == "import-hf":
            p.add_argument("folder", help="the checkpoint folder (config.json and "
                                          "model.safetensors, as save_pretrained writes them)")
            p.add_argument("--ids", help="the prompt as token ids, separated by commas (for a "
                                         "checkpoint without a tokenizer decodelab reads)")
            p.add_argument("--json", action="store_true", help="include every step's record")
        if name == "export-hf":
            p.add_argument("--out", help="the folder to write; it must not exist yet, or be "
                                         "empty")
        if name == "chat":
            p.add_argument("--message", help="what you say to the model (the new user turn)")
            p.add_argument("--system", help="a system message (default: the template's own)")
            p.add_argument("--history", help="the conversation so far: a JSON file (a list of "
                                             "{role, content}, or an earlier chat's output), "
                                             "or that JSON itself")
            p.add_argument("--json", action="store_true", help="JSON (the only output form)")
        if name in ("generate", "chat", "cache-check", "tokenize", "detokenize", "export-hf",
                    "paged"):
            p.add_argument("--engine", default="reference",
                           help="the pretrained model's arithmetic: reference (float32, as "
                                "transformers; the default) or quantized (the file's Q4_1 and "
                                "Q8_0 blocks multiplied as llama.cpp multiplies them)")
            p.add_argument("--gguf", help="read the pretrained model from this GGUF file "
                                          "(Llama architecture; F32, F16, Q8_0, Q4_0 or Q4_1; at "
                                          "most 256 MiB) instead of SmolLM2's")
        if name in ("generate", "chat", "ask", "experiment", "validity", "cache-check", "eval",
                    "tokenize", "detokenize", "export-hf", "paged"):
            p.add_argument("--assets", help="assets folder (default: $DECODELAB_ASSETS, the "
                                            "package's own data, or a checkout's artifacts/)")
    return parser


def _join_number_lists(argv: list) -> list:
    """Let `--logits -1,2` work: argparse would read "-1,2" as an option, so glue it on."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--logits", "--probs", "--text") and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def say_finish(run) -> None:
    """How a run ended, on stderr: finish and stop reason, and the answer's JSON status."""
    shape = run.json_report()
    said = f" json={shape['status']}" if shape["status"] else ""
    print(f"[finish_reason={run.finish_reason} stop_reason={run.stop_reason}{said}]",
          file=sys.stderr)
    if shape["error"]:
        print(f"[{shape['error']}]", file=sys.stderr)


def say_search(trace: dict, prompt: str) -> None:
    """A search's result in words: the ranked beams, or the text with the draft's record."""
    if trace["strategy"] == "beam":
        for i, b in enumerate(trace["beams"], 1):
            print(f"{i}. {prompt + b['text']}")
            print(f"   score {b['score']:.4f}, log-probability per token "
                  f"{b['logprob_per_token']:.4f}, finish_reason={b['finish_reason']} "
                  f"stop_reason={b['stop_reason']}")
        print(f"[search ended: {trace['stopped']}]", file=sys.stderr)
        return
    print(prompt + trace["text"])
    rate = trace["acceptance_rate"]
    print(f"[finish_reason={trace['finish_reason']} stop_reason={trace['stop_reason']} "
          f"acceptance_rate={'none' if rate is None else f'{rate:.3f}'} "
          f"tokens_per_pass={trace['tokens_per_pass']:.2f}]", file=sys.stderr)


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = with_defaults(parser.parse_args(_join_number_lists(sys.argv[1:] if argv is None
                                                                  else argv)))
    except UsageError as e:
        print(str(e).replace("\n", " "), file=sys.stderr)
        return 2
    prog = f"decodelab {args.command}"
    try:
        out = COMMANDS[args.command][-1](args)
    except (FieldError, FieldErrors) as e:
        first = e.errors[0] if isinstance(e, FieldErrors) else e
        name = first.field if first.field == "checkpoint" else option(first.field)  # FOLDER
        print(f"{prog}: {name}: {first.message}", file=sys.stderr)
        return 2
    if args.command == "generate" and not args.json and search_kind(out.settings) is not None:
        say_search(out.trace(), args.prompt or "")
        return 0
    if args.command == "generate" and not args.json and out.tools.markers:  # a question, an answer
        print(args.prompt)
        for c in out.tool_calls:
            said = c["result"] if c["error"] is None else f"error: {c['error']}"
            print(f"  calculator({c['call']}) = {said if c['by'] else '(not run)'}")
        print(out.text)
        say_finish(out)
        return 0
    if args.command == "generate" and not args.json:
        print(args.prompt + out.text if args.prompt else out.text)
        say_finish(out)
        return 0
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0
