"""Take it to transformers: the model of a finished run as the folder Hugging Face transformers
loads, in one zip, with a script that repeats the run there.

The zip holds one folder: the export (`hf.files`: config.json, model.safetensors,
generation_config.json with the run's settings in transformers' names), the tokenizer's files
(`hftokenizer`), `run.json` (what the run did: the ids it started from, each step's token, who
wrote it and the probabilities decodelab gave its candidates) and `repeat.py`. The script loads
the folder with `AutoModelForCausalLM` (no code of ours), feeds it the run's tokens, puts each
step's logits through transformers' own logits processors in the order `generate` applies them,
and prints how far those probabilities are from decodelab's. Greedy, it also calls `generate`
and compares the tokens one by one. Sampled, it draws with `generate` too, and says why the
draws differ: transformers draws with torch.multinomial, decodelab with one uniform number per
step and the inverse of the cumulative distribution (so that the browser and CPython agree).

What transformers has no setting for is said, not imitated: at such a step the script compares
the model's own distribution (p_raw) instead of the final one. Those are JSON mode's grammar,
the filter-first order, token healing's first step, tool results (the program writes those
tokens; they are fed, not compared) and steps past the window (decodelab shifts its context
there; transformers would read on with positions it was not trained for).

Everything is built in memory with the standard library, so the page makes the same zip.
"""

import io
import json

from decodelab.core.interop import hf
from decodelab.core.interop.hftokenizer import tokenizer_files
from decodelab.errors import FieldError
from decodelab.fields import default

SCRIPT = "repeat.py"
# The decoding rules transformers has no setting for (hf.NOT_IN_TRANSFORMERS), each with the
# note run.json carries when it was on: every step then compares the model's own
# probabilities. The others reach the script through the generation config (hf.RULES), and
# its processors() reads each of them.
RAW_NOTES = {"order": "The filters ran before temperature (filter-first); transformers always "
                      "applies temperature first, so each step compares the model's own "
                      "probabilities."}


def plan(run) -> dict:
    """run.json: what the run did and, per step, which of decodelab's distributions transformers'
    processors can give ("final", or "raw" where a rule transformers lacks was in play, or
    "fed" for a token the program wrote), with the reasons in words."""
    s = run.settings
    trace = run.trace()
    start = list(run.model.tokenizer.start_ids) + list(trace["prompt_ids"])
    window = run.model.cfg.context_size
    notes, steps, model_steps = [], [], 0
    # greedy: the final distribution is all on one token, so compare the model's own and check
    # that the token is the largest after transformers' processors
    lacking = [name for name in RAW_NOTES if getattr(s, name) != default(name)]
    whole = "raw" if (s.json_mode or lacking) else "greedy" if s.is_greedy else "final"
    if s.json_mode:
        notes.append("JSON mode masks every token that cannot continue the object; transformers "
                     "has no such grammar, so each step compares the model's own probabilities.")
    notes += [RAW_NOTES[name] for name in lacking]
    if trace["healed"] is not None:
        notes.append("Token healing took the prompt's last token back and let the first step "
                     "choose only tokens that start with it; transformers has no such mask, so "
                     "the first step compares the model's own probabilities.")
    beyond = 0
    for i, step in enumerate(trace["steps"]):
        if step["phase"] == "tool":
            steps.append({"token_id": step["token_id"], "compare": "fed", "candidates": []})
            continue
        compare = whole
        if len(start) + i > window:
            compare, beyond = "none", beyond + 1
        elif i == 0 and trace["healed"] is not None:
            compare = "raw"
        key = "p_final" if compare == "final" else "p_raw"
        steps.append({"token_id": step["token_id"], "compare": compare,
                      "candidates": [[c["token_id"], c[key]] for c in step["top"]]})
        model_steps += 1
    if beyond:
        notes.append(f"{beyond} step(s) came after the window of {window} tokens was full, "
                     f"where decodelab shifts its context; they are not compared.")
    if any(st["compare"] == "fed" for st in steps):
        notes.append("The calculator's results were written by the program, not the model: the "
                     "script feeds them as they were and compares only the model's steps.")
    same_tokens = (whole == "greedy" and trace["healed"] is None and not beyond
                   and not s.stop and all(st["compare"] != "fed" for st in steps))
    return {
        "settings": trace["settings"], "generation": hf.generation_config(s),
        "start_ids": start, "text": trace["text"], "greedy": s.is_greedy, "seed": s.seed,
        "steps": steps, "finish_reason": trace["finish_reason"],
        "generate_repeats_tokens": same_tokens, "notes": notes,
    }


def folder_name(settings) -> str:
    return f"decodelab-{settings.dataset}-{settings.tokenizer}"


def bundle(run) -> tuple[str, bytes]:
    """(file name, the zip's bytes) for a finished run of a transformer."""
    import zipfile  # on demand: the page's start does not need it
    if not run.model.handoff:
        raise FieldError("model", "Only a transformer can be taken to transformers; the bigram "
                                  "is a table of counts, not an architecture it knows. Choose "
                                  "the transformer and generate again.")
    files = hf.files(run.model, run.settings, tokenizer_files(run.model.tokenizer))
    files["run.json"] = (json.dumps(plan(run), indent=1, ensure_ascii=False) + "\n").encode()
    files[SCRIPT] = REPEAT.encode()
    name = folder_name(run.settings)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for file, data in files.items():
            info = zipfile.ZipInfo(f"{name}/{file}", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return f"{name}.zip", buf.getvalue()


# The script in the zip: standard library, torch and transformers only. It is data here, written
# into the zip as it is; tests/test_handoff.py runs it against the real library.
REPEAT = '''"""Repeat a decodelab run in Hugging Face transformers.

    pip install torch transformers safetensors
    python repeat.py

This folder is a Llama checkpoint transformers loads as it is (no remote code). run.json is the
run decodelab made; the script feeds its tokens to the model, puts each step's logits through
transformers' own logits processors in the order generate applies them, and prints how far their
probabilities are from decodelab's. Greedy, generate repeats the run token for token.
Sampled, generate draws other tokens from the same distributions: transformers draws with
torch.multinomial, decodelab with one uniform number per step and the inverse of the cumulative
distribution, so that a browser and CPython draw the same token.
"""

import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from transformers.generation import logits_process as lp

HERE = Path(__file__).resolve().parent
run = json.loads((HERE / "run.json").read_text(encoding="utf-8"))
model = AutoModelForCausalLM.from_pretrained(HERE, dtype=torch.float64).eval()
tokenizer = AutoTokenizer.from_pretrained(HERE)
gen = GenerationConfig.from_pretrained(HERE)
start = run["start_ids"]  # decodelab's start token (EOS, id 0), then the prompt as it read it


def processors():
    """The processors generate builds from this generation config, in its order."""
    out = []
    if gen.repetition_penalty not in (None, 1.0):
        out.append(lp.RepetitionPenaltyLogitsProcessor(gen.repetition_penalty))
    if gen.min_new_tokens:
        # the ids below start after decodelab's start token, so the prompt is one shorter
        out.append(lp.MinNewTokensLengthLogitsProcessor(len(start) - 1, gen.min_new_tokens, 0))
    if gen.suppress_tokens:
        out.append(lp.SuppressTokensLogitsProcessor(gen.suppress_tokens))
    if gen.do_sample:
        if gen.temperature not in (None, 1.0):
            out.append(lp.TemperatureLogitsWarper(gen.temperature))
        if gen.top_k:
            out.append(lp.TopKLogitsWarper(gen.top_k))
        if gen.top_p is not None and gen.top_p < 1.0:
            out.append(lp.TopPLogitsWarper(gen.top_p))
        if gen.min_p:
            out.append(lp.MinPLogitsWarper(gen.min_p))
        if gen.typical_p is not None and gen.typical_p < 1.0:
            out.append(lp.TypicalLogitsWarper(gen.typical_p))
    return lp.LogitsProcessorList(out)


ids = start + [s["token_id"] for s in run["steps"]]
with torch.no_grad():
    logits = model(torch.tensor([ids])).logits[0]  # one pass: row t scores token t + 1
procs = processors()
worst = {"final": 0.0, "raw": 0.0}
compared = not_largest = 0
for i, step in enumerate(run["steps"]):
    if step["compare"] not in ("final", "raw", "greedy"):
        continue  # a token the program wrote, or a step past the window
    row = logits[len(start) + i - 1][None]
    # decodelab's repetition penalty counts the prompt and the output, not its start token
    seen = torch.tensor([ids[1:len(start) + i]])
    if step["compare"] == "final":
        p, kind = torch.softmax(procs(seen, row.clone()), -1)[0], "final"
    else:
        p, kind = torch.softmax(row, -1)[0], "raw"
    if step["compare"] == "greedy":
        not_largest += int(procs(seen, row.clone()).argmax()) != step["token_id"]
    for token, ours in step["candidates"]:
        worst[kind] = max(worst[kind], abs(float(p[token]) - ours))
    compared += 1

print(f"decodelab's run: {run['text']!r} ({len(run['steps'])} steps, {run['finish_reason']})")
for note in run["notes"]:
    print("note:", note)
print(f"{compared} steps compared, each step's candidates as decodelab listed them:")
if not run["greedy"] and (worst["final"] or not worst["raw"]):
    print(f"  final probabilities, transformers' processors: largest difference {worst['final']:.1e}")
if worst["raw"]:
    print(f"  the model's own probabilities: largest difference {worst['raw']:.1e}")
if run["greedy"]:
    print(f"  greedy: at {compared - not_largest} of {compared} steps decodelab's token is the "
          f"largest after transformers' processors")
print("  (transformers computes RMSNorm and the rotation tables in float32 even in a float64")
print("  model, so expect differences up to about 1e-5, not 1e-15)")

prompt = torch.tensor([start])
# within the window the model was trained on (decodelab shifts its context past it)
gen.max_new_tokens = min(gen.max_new_tokens, model.config.max_position_embeddings - len(start))
if run["greedy"]:
    out = model.generate(prompt, generation_config=gen, tokenizer=tokenizer)[0, len(start):].tolist()
    theirs = out[:len(run["steps"])]
    if run["generate_repeats_tokens"]:
        ours = [s["token_id"] for s in run["steps"]]
        same = theirs == ours or (theirs == ours + [0] and run["finish_reason"] == "stop")
        print(f"generate, greedy: {tokenizer.decode(theirs, skip_special_tokens=True)!r}")
        print("  the same tokens as decodelab" if same else "  NOT the same tokens as decodelab")
    else:
        print("generate, greedy:", repr(tokenizer.decode(theirs, skip_special_tokens=True)))
        print("  (this run used what generate does not have, see the notes: not compared)")
else:
    torch.manual_seed(run["seed"])
    out = model.generate(prompt, generation_config=gen, tokenizer=tokenizer)[0, len(start):].tolist()
    print(f"generate, sampled with torch.manual_seed({run['seed']}):",
          repr(tokenizer.decode(out, skip_special_tokens=True)))
    print("  other tokens than decodelab's, from the same distributions: torch.multinomial draws")
    print("  differently from decodelab's one uniform number per step and inverse CDF")
'''
