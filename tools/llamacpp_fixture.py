"""Record what llama.cpp itself computes on SmolLM2's Q4_1 file, for the quantized engine's
tests (tests/fixtures/llamacpp_smollm2.json). Run once, and again by anyone who doubts it:

    python3 -m pip install --no-binary llama-cpp-python llama-cpp-python==0.3.36   # a source
    python3 tools/llamacpp_fixture.py        # build, about 8 minutes on 2 cores, once

For each chat below (its prompt's token ids made by decodelab's template and tokenizer, so
both sides read the very same ids) it records llama.cpp's greedy answer, one token at a time
as a chat decodes, then reads prompt and answer again in one batch (teacher-forced) and keeps
each position's top logits; the greedy steps' own top logits are kept too (one position a
call, as a chat decodes: llama.cpp may multiply a batch of positions otherwise). It also times llama.cpp's one-thread decode and prefill on the
same file, for the benchmark's comparison. One thread, so the numbers are of one core.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py"))
OUT = ROOT / "tests" / "fixtures" / "llamacpp_smollm2.json"
VERSION = "0.3.36"  # llama-cpp-python, which pins its llama.cpp
CHATS = [
    "What is the capital of France?",
    "What is the capital of Japan?",
    "What is 7 + 5?",
    "Name three colours.",
    "Write a haiku about the sea.",
    "Give me a JSON object with a name and an age.",
    "Explain in one sentence what a KV cache is.",
    "What is 12 + 19?",
]
ANSWER_TOKENS = 24  # greedy tokens per chat at most
TOP = 20  # logits kept per position


def main() -> int:
    import numpy as np

    try:
        import llama_cpp
    except ImportError:
        print(__doc__)
        return 2
    from decodelab.pretrained import files, model as pretrained

    path = files.find_smollm2()
    smol = pretrained.load(path)
    llm = llama_cpp.Llama(str(path), n_ctx=512, n_batch=512, n_threads=1, n_threads_batch=1,
                          logits_all=True, verbose=False)
    chats = []
    for text in CHATS:
        prompt = smol.template.ids([{"role": "user", "content": text}])
        llm.reset()
        llm.eval(prompt)
        answer, steps = [], []
        for _ in range(ANSWER_TOKENS):
            row = np.asarray(llm.scores[llm.n_tokens - 1], np.float32)
            token = int(np.argmax(row))
            steps.append(top_of(row, llm.n_tokens - 1, np))
            answer.append(token)
            if token == smol.tokenizer.eos_id:
                break
            llm.eval([token])
        llm.reset()
        llm.eval(prompt + answer)
        scores = np.asarray(llm.scores[:llm.n_tokens], np.float32)
        positions = [top_of(scores[at], at, np)
                     for at in range(len(prompt) - 1, len(prompt) + len(answer) - 1)]
        chats.append({"message": text, "prompt_ids": prompt, "greedy_ids": answer,
                      "greedy_text": smol.tokenizer.decode(answer), "greedy_steps": steps,
                      "teacher_forced": positions})
        print(f"{text!r}: {smol.tokenizer.decode(answer)!r}", flush=True)
    speed = timing(llm, chats[0]["prompt_ids"], np)
    record = {"about": "llama.cpp's greedy answers and teacher-forced top logits on "
                       "SmolLM2-135M-Instruct.Q4_1.gguf (tools/llamacpp_fixture.py)",
              "llama_cpp_python": llama_cpp.__version__, "threads": 1,
              "machine": platform.machine(), "processor": platform.processor() or "",
              "file_sha256": files.GGUF_SHA256, "top": TOP, "speed": speed, "chats": chats}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}; one thread: decode {speed['decode_tokens_per_s']} "
          f"tokens/s, prefill {speed['prefill_tokens_per_s']} tokens/s")
    return 0


def top_of(row, at: int, np) -> dict:
    """A position's TOP highest logits: {"at", "ids", "logits"}."""
    top = np.argsort(-row, kind="stable")[:TOP]
    return {"at": at, "ids": top.tolist(), "logits": [round(float(row[i]), 5) for i in top]}


def timing(llm, prompt: list, np) -> dict:
    """One-thread decode (64 tokens after the prompt) and prefill (the prompt four times over),
    the best of three runs."""
    decode, prefill = [], []
    long = (prompt * 4)[:200]
    for _ in range(3):
        llm.reset()
        llm.eval(prompt)
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        start = time.perf_counter()
        for _ in range(64):
            llm.eval([token])
            token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        decode.append(64 / (time.perf_counter() - start))
        llm.reset()
        start = time.perf_counter()
        llm.eval(long)
        prefill.append(len(long) / (time.perf_counter() - start))
    return {"decode_tokens_per_s": round(max(decode), 1),
            "prefill_tokens_per_s": round(max(prefill), 1), "decode_after": len(prompt),
            "prefill_tokens": len(long)}


if __name__ == "__main__":
    sys.exit(main())
