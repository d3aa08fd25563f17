"""``python -m decodelab``: the decoding engine from the command line, JSON on stdout.

    probs        the decoding rules on logits or probabilities you type
    generate     a run with a trained model (--json prints the full trace)
    kv-memory    KV-cache bytes for a model shape
    eval         validation negative log-likelihood of a model on its dataset

Bad arguments exit with status 2 and one line on stderr naming the option and what is allowed.
"""

import argparse
import json
import sys

from decodelab.errors import FieldError, FieldErrors


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse, but every complaint is a single line (and the process exits with status 2)."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _option(field: str) -> str:
    return "--" + field.replace("_", "-")


def _fail(prog: str, e) -> int:
    first = e.errors[0] if isinstance(e, FieldErrors) else e
    print(f"{prog}: {_option(first.field)}: {first.message}", file=sys.stderr)
    return 2


def _decoding_options(p, with_stop: bool):
    p.add_argument("--temperature")
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--top-k")
    p.add_argument("--top-p")
    p.add_argument("--min-p")
    p.add_argument("--order")
    if with_stop:
        p.add_argument("--repetition-penalty")
        p.add_argument("--max-new-tokens")
        p.add_argument("--min-new-tokens")
        p.add_argument("--stop", action="append")
        p.add_argument("--include-stop", action="store_true")
        p.add_argument("--ignore-eos", action="store_true")


def build_parser() -> Parser:
    parser = Parser(prog="decodelab", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("probs", help="apply the decoding rules to numbers you type")
    p.add_argument("--logits")
    p.add_argument("--probs")
    _decoding_options(p, with_stop=False)

    g = sub.add_parser("generate", help="generate with a trained model")
    g.add_argument("--model", default="bigram")
    g.add_argument("--dataset", default="names")
    g.add_argument("--prompt", default="")
    g.add_argument("--seed")
    _decoding_options(g, with_stop=True)
    g.add_argument("--cache-check", action=argparse.BooleanOptionalAction, default=None,
                   help="transformer: compare cached and recomputed logits every step (default on)")
    g.add_argument("--json", action="store_true", help="print the whole trace as JSON")
    g.add_argument("--assets", help="assets folder (default: artifacts/ or $DECODELAB_ASSETS)")

    k = sub.add_parser("kv-memory", help="KV-cache bytes for a model shape")
    for name in ("layers", "kv-heads", "head-dim", "bytes-per-element", "tokens"):
        k.add_argument("--" + name, required=True)
    k.add_argument("--sequences", default="1")

    c = sub.add_parser("cache-check", help="cached vs full-recompute logits, step by step")
    c.add_argument("--model", default="transformer")
    c.add_argument("--dataset", required=True)
    c.add_argument("--prompt", default="")
    c.add_argument("--steps", required=True)
    c.add_argument("--seed", default="0")
    c.add_argument("--dtype", default="float32")
    c.add_argument("--assets")

    e = sub.add_parser("eval", help="validation NLL (nats per token) of a model")
    e.add_argument("--model", default="bigram")
    e.add_argument("--dataset", required=True)
    e.add_argument("--assets")
    return parser


def _given(args, names) -> dict:
    """The options the user actually gave, as raw values keyed by setting name."""
    out = {}
    for name in names:
        value = getattr(args, name, None)
        if value is not None and (value is not False or name == "cache_check"):
            out[name] = value
    return out


SETTING_NAMES = ("model", "dataset", "prompt", "seed", "temperature", "greedy", "top_k", "top_p",
                 "min_p", "repetition_penalty", "order", "max_new_tokens", "min_new_tokens",
                 "stop", "include_stop", "ignore_eos", "cache_check")


def cmd_probs(args) -> dict:
    from decodelab.playground import probs_from_request

    req = _given(args, ("logits", "probs", "temperature", "greedy", "top_k", "top_p", "min_p",
                        "order"))
    out = probs_from_request(req)
    return {"probs": out["probs"], "kept": out["kept"]}


def cmd_generate(args):
    from decodelab.assets import Library
    from decodelab.generate import start

    raw = _given(args, SETTING_NAMES)
    if args.seed is None:
        raise FieldError("seed", "Seed is required: give a whole number from 0 to 4294967295.")
    run = start(Library(args.assets), raw).run()
    if args.json:
        return run.trace()
    return run


def cmd_kv_memory(args) -> dict:
    from decodelab.kvcache import kv_cache_bytes

    values = {}
    for name in ("layers", "kv_heads", "head_dim", "tokens", "sequences", "bytes_per_element"):
        raw = getattr(args, name)
        try:
            x = float(raw)
        except ValueError:
            x = float("nan")
        whole = name != "bytes_per_element"
        if not (x > 0 and x < 1e15) or (whole and not x.is_integer()):
            kind = "a whole number" if whole else "a number"
            raise FieldError(name, f"must be {kind} greater than 0; got {raw!r}.")
        values[name] = int(x) if whole else x
    return kv_cache_bytes(**values)


def cmd_eval(args) -> dict:
    from decodelab.assets import Library
    from decodelab.settings import check_field

    check_field("model", args.model)
    lib = Library(args.assets)
    corpus = lib.corpus(args.dataset)
    model = lib.model(args.model, args.dataset)
    return {"val_nll": model.nll(corpus.val), "params": model.n_params,
            "train_nll": model.nll(corpus.train), "model": args.model, "dataset": args.dataset,
            "val_sequences": len(corpus.val)}


def cmd_cache_check(args) -> dict:
    import numpy as np

    from decodelab.assets import Library
    from decodelab.kvcache import cache_check
    from decodelab.settings import check_field

    if args.model != "transformer":
        raise FieldError("model", "Model must be transformer: only it has a KV cache to check; "
                                  f"got {args.model!r}.")
    if args.dtype not in ("float32", "float64"):
        raise FieldError("dtype", f"must be one of float32, float64; got {args.dtype!r}.")
    try:
        steps = check_field("max_new_tokens", args.steps)
    except FieldError:
        raise FieldError("steps", f"must be a whole number from 1 to 10000; got {args.steps!r}.")
    seed = check_field("seed", args.seed)
    model = Library(args.assets).model("transformer", args.dataset)
    prompt_ids = model.tokenizer.encode(check_field("prompt", args.prompt))
    return cache_check(model, prompt_ids, steps, seed, dtype=np.dtype(args.dtype))


COMMANDS = {"probs": cmd_probs, "cache-check": cmd_cache_check, "generate": cmd_generate, "kv-memory": cmd_kv_memory,
            "eval": cmd_eval}


def _join_number_lists(argv: list) -> list:
    """Let `--logits -1,2` work: argparse would read "-1,2" as an option, so glue it on."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--logits", "--probs") and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_join_number_lists(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(str(e).replace("\n", " "), file=sys.stderr)
        return 2
    prog = f"decodelab {args.command}"
    try:
        out = COMMANDS[args.command](args)
    except (FieldError, FieldErrors) as e:
        return _fail(prog, e)
    if args.command == "generate" and not args.json:
        print(args.prompt + out.text)
        print(f"[finish_reason={out.finish_reason} stop_reason={out.stop_reason}]",
              file=sys.stderr)
        return 0
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0
