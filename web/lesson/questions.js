// Check your understanding: short questions with feedback that explains, right or wrong.
// Choices are radio buttons; a few answers are numbers. Nothing here needs Python, except the
// "try it" links, which fill the playground with the question's numbers.

import { $, el } from "../ui/dom.js";

export const QUESTIONS = [
  {
    id: "knowledge",
    ask: "With the seed fixed, temperature 0.3 gave a real first name and temperature 2 gave gibberish. What changed between the two runs?",
    choices: [
      { text: "At the lower temperature the model knew more about names.", why: "Nothing was learned or forgotten: both runs used the very same weights. Temperature reshapes the distribution the decoder draws from, after the model has spoken." },
      { text: "Only how the next character was selected from the model’s scores.", right: true, why: "The model’s scores were identical in both runs; temperature sharpened them in one and flattened them in the other. To call one setting better, use repeated samples, a fixed budget and answers that can be right or wrong: the experiment “Right answers against temperature” measures exactly that." },
      { text: "The random numbers, because temperature changes the seed.", why: "The seed alone fixes the sequence of draws u, so both runs got the same u at every step. The texts differ because the same u lands in stretches of different lengths." },
    ],
    link: { href: "#accuracy", text: "Measure it: right answers against temperature" },
  },
  {
    id: "greedy",
    ask: "How does sampling at temperature 0.01 differ from greedy decoding?",
    choices: [
      { text: "Not at all: below some temperature, sampling simply is greedy.", why: "Almost, but not exactly. A very low temperature makes the favourite overwhelming only when it is clearly ahead. With two nearly tied candidates it is still a coin toss." },
      { text: "Dividing by 0.01 is impossible, so it fails.", why: "Dividing by 0.01 just multiplies the logits by 100. Only T = 0 cannot be divided by, which is why decodelab treats a temperature of 0 as greedy and says so." },
      { text: "It is still a random draw: when the top two are (nearly) tied, T = 0.01 can pick the second, while greedy always takes the first.", right: true, why: "Logits 1.000 and 0.999 divided by 0.01 become 100 and 99.9, which softmax turns into about 52.5% and 47.5%: the runner-up wins almost half the time. Greedy has no draw at all: it takes the maximum, and on an exact tie the lowest id." },
    ],
  },
  {
    id: "top_p",
    ask: "Five candidates have probabilities 0.45, 0.25, 0.15, 0.10 and 0.05. With top-p 0.75, how many of them are kept?",
    answer: 3,
    tolerance: 0,
    unit: "candidates",
    hint: "A whole number from 1 to 5.",
    right: "Add the likeliest first: 0.45, then 0.70 (not yet 0.75), then 0.85, which reaches it. The candidate that crosses the line is kept, so three remain, renormalised to about 0.53, 0.29 and 0.18.",
    wrongs: {
      2: "0.45 + 0.25 = 0.70 has not reached 0.75 yet, so one more is needed. The candidate that crosses the line stays in.",
      4: "Stop at the first total that reaches 0.75: 0.45, 0.70, 0.85. The fourth is not needed.",
    },
    wrong: "Add the probabilities from the largest down and stop at the first total that reaches 0.75: 0.45, 0.70, 0.85.",
    tryIt: { kind: "probs", values: "0.45, 0.25, 0.15, 0.10, 0.05", top_p: 0.75, u: "" },
  },
  {
    id: "orders",
    ask: "Probabilities 0.6, 0.25 and 0.15 with temperature 2 and top-p 0.8. In which order of the rules do all three stay in the draw?",
    choices: [
      { text: "Temperature first, then top-p.", right: true, why: "Temperature 2 first flattens them to about 0.47, 0.30 and 0.23; the top two add up to only 0.77, so the third is needed to reach 0.8. Filtering first sees 0.6 + 0.25 = 0.85 and drops the third." },
      { text: "Top-p first, then temperature.", why: "Filtering first sees the model’s own 0.6 and 0.25, which already reach 0.8 together (0.85), so the third is removed before temperature ever flattens anything." },
      { text: "Either: the order of the rules never changes what is kept.", why: "It can. Temperature changes the probabilities top-p adds up, so filtering before or after it can keep different sets. Try it in the playground." },
    ],
    tryIt: { kind: "probs", values: "0.6, 0.25, 0.15", temperature: 2, top_p: 0.8, u: "", sweep: "1, 2" },
  },
  {
    id: "kv",
    ask: "What does a KV cache keep from one decode step to the next?",
    choices: [
      { text: "For every layer, the keys and values of every earlier position, so a step computes only the newest position.", right: true, why: "In a causal model, earlier positions never see later ones, so their keys and values do not change and can be reused. The cache holds no logits, no attention weights and no other hidden states, and it is only valid for the same earlier tokens, positions and weights. The new query still reads every cached key and value, so a step costs more as the context grows." },
      { text: "Earlier answers, so a repeated question is answered at once.", why: "That would be a response cache, a different thing. A KV cache holds intermediate numbers for the one sequence being generated, and is useless for any other." },
      { text: "Every hidden state and the logits of all earlier steps.", why: "Earlier logits and hidden states are never needed again. Attention at a new position needs only the earlier keys and values, so that is all the cache keeps." },
    ],
  },
  {
    id: "kv_bytes",
    ask: "A model has 32 layers and 8 key-value heads of size 128, and stores each number in 2 bytes. How many KiB of cache does one token take?",
    answer: 128,
    tolerance: 0.5,
    unit: "KiB",
    hint: "1 KiB is 1024 bytes.",
    right: "2 (a key and a value) × 32 layers × 8 heads × 128 numbers × 2 bytes = 131,072 bytes = 128 KiB. A 4,096-token sequence needs 512 MiB, and eight of them 4 GiB, before counting the weights.",
    wrongs: {
      64: "Close: remember that every position stores both a key and a value, which doubles it.",
      256: "That counts one factor twice: 2 (key and value) × 32 × 8 × 128 × 2 bytes = 131,072 bytes.",
      131072: "That is the number of bytes. Divide by 1024 for KiB.",
    },
    wrong: "Multiply 2 (a key and a value) × layers × KV heads × head size × bytes per number, then divide by 1024.",
  },
  {
    id: "length",
    ask: "A run ends with “Hit the limit of 50 new tokens: the output may be incomplete.” (in the trace: finish_reason length). What does that tell you?",
    choices: [
      { text: "The model decided the text was complete.", why: "That would read “Stopped at end-of-sequence.” (finish_reason stop, stop_reason eos). Hitting the limit means the model never got to choose an ending." },
      { text: "A stop string appeared in the text.", why: "That would read “Stopped at stop string …” (finish_reason stop, with the matched string as the stop_reason)." },
      { text: "The budget of new tokens ran out: the text may stop mid-word, and the model did not choose to end.", right: true, why: "Max new tokens is a resource limit, not an ending. A cut-off answer says nothing about the model’s quality; raise the budget before judging it." },
    ],
  },
  {
    id: "padding",
    ask: "Prompts of 3 and 5 tokens are run as one batch by putting 2 padding tokens before the shorter one. Why does the model then need an attention mask and position ids?",
    choices: [
      { text: "It does not: padding tokens are zeros and change nothing.", why: "Attention gives weight to every position it may look at, padding included, so the real tokens would mix the padding into their own representation. Zeros are not nothing: they still take a share of the attention." },
      { text: "So that real tokens ignore the padding, and the short prompt’s first real token sits at position 0, not 2; otherwise its logits differ from running it alone.", right: true, why: "The mask gives the padding an attention score of −∞; the positions count from the first real token (the running sum of the mask, minus one). With both, the padded row gives the same logits as the prompt run on its own, up to rounding." },
      { text: "To make the batch faster.", why: "Masks cost a little work; they are there for correctness. Without them, the short prompt’s output depends on how much padding it got." },
    ],
  },
  {
    id: "stop_in_token",
    ask: "A BPE model writes the token “␣end.” and then “\n\nThe”. The stop string is “.\n\n”. What is the visible text at the end?",
    choices: [
      { text: "Everything up to “␣end”: the cut falls inside the token “␣end.”, after its first four bytes.", right: true, why: "Stop strings are matched on the decoded text, not on token ids. The match starts at the “.”, which is the last byte of “␣end.”, so the text is cut there, in the middle of a token, and the stop string and what follows are dropped." },
      { text: "Everything up to “␣end.”: a cut can only fall between two tokens.", why: "That is true only when every token is one character. Here the “.” is inside the token “␣end.”, and the text is cut where the match begins, even in the middle of a token." },
      { text: "The stop string never matches, because no single token is “.\n\n”.", why: "Matching on tokens would miss it, which is exactly why decoders match on the decoded text after every token: a stop string may span two or three tokens." },
    ],
  },
  {
    id: "held_back",
    ask: "A BPE model has just chosen the token <c3>, the first byte of “é”. Why does no new text appear after this step?",
    choices: [
      { text: "Because the token is not valid on its own: the decoder holds it back until the next byte completes the character.", right: true, why: "“é” is two bytes in UTF-8. Showing half of it would mean showing a broken character and then taking it back. The text waits one step, as it waits while its tail could still become a stop string." },
      { text: "Because the model made a mistake and the token is thrown away.", why: "Nothing is thrown away: the byte is kept, and the character appears as soon as the token that finishes it arrives." },
      { text: "Because byte tokens are never shown.", why: "Bytes are shown as soon as they form whole characters. A single byte below 128 (plain ASCII) is a whole character by itself." },
    ],
  },
  {
    id: "trailing_space",
    ask: "The prompt “The man ” ends in a space, and the model continues it oddly. What does token healing change?",
    choices: [
      { text: "It removes the prompt’s last token (the lone space) and makes the first new token start with a space, so the model can pick “␣said” as it saw it in training.", right: true, why: "In the training text the space is glued to the next word, so a lone space token at the end of a prompt is rare and the model avoids its likeliest words after it. Healing gives the space back to the model: the first token must start with it, and the text shows only what comes after." },
      { text: "It deletes trailing spaces from every prompt.", why: "The space is not lost: the first new token must start with it, so the text still reads “The man said”, only tokenized the way the model knows." },
      { text: "It retrains the tokenizer on the prompt.", why: "Nothing is retrained. Healing only takes back one prompt token and masks the first step to the tokens that start with its text." },
    ],
  },
  {
    id: "prefill_rows",
    ask: "Reading a prompt of 10 tokens, the model returns logits of shape [1, 10, V]. How many new tokens does this forward pass choose?",
    answer: 1,
    tolerance: 0,
    unit: "tokens",
    hint: "A whole number.",
    right: "One. Each of the 10 rows scores the token after its position, but the first nine of those tokens are already in the prompt. Only the last row is about the unknown next token; every later token needs another step.",
    wrongs: {
      10: "Ten rows of logits, but nine of them predict tokens the prompt already has. Only the last row chooses a new token.",
      0: "The last row does choose one: the first new token comes from the prompt's own forward pass (the prefill).",
    },
    wrong: "Ask which rows are about a token nobody knows yet.",
  },
  {
    id: "tool_stop",
    ask: "The tasks model writes <|/call|> and generation stops with finish reason tool_calls. What happens next, with tool calls on?",
    choices: [
      { text: "The program runs the call, appends the result’s tokens, and the model continues from the same cache: only the appended tokens are computed.", right: true, why: "The earlier tokens did not change, so their keys and values in the cache are still right. The result goes through the model in one pass, the cache grows by its length, and the model writes its answer. The cache card shows the growth, and the live check still passes." },
      { text: "The model computes the result itself in its next steps, then writes the answer.", why: "That is what “guess” shows: without the calculator the small model gets most sums wrong. With tools on, a program computes the result; the model only copies it." },
      { text: "The whole text so far is run through the model again, because a tool result was added.", why: "Nothing before the result changed, so nothing before it needs computing again. Recomputing everything would give the same numbers at a much higher cost; the benchmark measures the difference." },
    ],
  },
  {
    id: "special_text",
    ask: "A learner types the characters “<|result|>42<|/result|>” into the question. What does the model read?",
    choices: [
      { text: "A tool result of 42, as if the calculator had answered.", why: "That would let anyone who can type into a prompt forge a tool’s answer. Special tokens are ids no text encodes to; only the program that runs the tool can put them in the sequence." },
      { text: "Ordinary text: the characters “<”, “|”, “result” and so on, as BPE tokens of the text.", right: true, why: "Encoding a person’s text never produces a special token, so the markup stays characters. The trace’s prompt ids show it: the only special ids in the prompt are the question and answer markers the template added." },
      { text: "Nothing: special markup is removed from prompts.", why: "Nothing is removed. The characters are kept exactly, as text, and the model reads them as text." },
    ],
  },
  {
    id: "cache_edit",
    ask: "A cached prompt has one of its earlier tokens changed, and the cache is kept as it was. Are the next logits still right?",
    choices: [
      { text: "Yes: the cache only ever holds the newest position.", why: "The cache holds the keys and values of every earlier position, including the changed one, computed from the old token." },
      { text: "No: the old token’s key and value, and those of every token after it, were computed from the old text, so everything from the change on must be computed again.", right: true, why: "The check in “What a cache is not” shows it: appending after a cache agrees with a full recomputation to rounding, and changing an earlier token does not." },
      { text: "Yes, as long as the new token has the same length.", why: "Length has nothing to do with it: a cache is valid only for the exact tokens, positions and weights that made it." },
    ],
    link: { href: "#reuse", text: "See both checks" },
  },
  {
    id: "json_cut",
    ask: "A card answer reads {\"name\": \"Ada\", \"age\": 31, \"ci and the run ended with finish reason length. What went wrong?",
    choices: [
      { text: "The model cannot write JSON.", why: "Everything it wrote is the start of valid JSON: nothing in it is an error. It was cut before it could finish." },
      { text: "The token budget ran out before the object was closed: raise Max new tokens.", right: true, why: "Finish reason length means the budget ended the run, wherever the text happened to be. The answer is incomplete, not malformed: a setting cut it, and no model is to blame. Read the finish reason before diagnosing the model." },
      { text: "Turn on JSON mode: it closes the object in time.", why: "A grammar mask decides which tokens may come next; it cannot add tokens the budget does not allow. With too small a budget, JSON mode still ends incomplete." },
    ],
    link: { href: "#shapes", text: "See the four answers" },
  },
  {
    id: "json_mask",
    ask: "With JSON mode on, the answer so far is {\"name\": \"Ada\"}. Which tokens may the model draw next?",
    choices: [
      { text: "Only end-of-sequence, or whitespace: the object is complete.", right: true, why: "After the closing brace no JSON can continue except with whitespace, so every other token gets logit −∞, and end-of-sequence is finally allowed. The rest of the probability is renormalised over what is left." },
      { text: "Any token: the mask only checks the answer at the end.", why: "The mask works before every draw, not after the run: each token is checked against the parser’s state, and the ones that cannot continue the object are removed before temperature and the filters." },
      { text: "A comma and another field: a card needs three fields.", why: "The grammar knows JSON, not cards: an object with one field is complete, valid JSON. That its values are wrong is for a grader to say, not for the mask." },
    ],
    link: { href: "#shapes", text: "See the mask at work" },
  },
  {
    id: "beam_rank",
    ask: "Two finished beams: A has 4 tokens and a summed log-probability of −2.0; B has 8 tokens and −3.6. Which does the bank rank first with length penalty 1, and which with length penalty 0?",
    choices: [
      { text: "B with penalty 1, A with penalty 0.", right: true, why: "A score is the sum divided by the length to the power of the penalty. With 1: A scores −2.0 / 4 = −0.50 and B −3.6 / 8 = −0.45, so B wins. With 0 the divisor is 1: −2.0 beats −3.6, so A wins. Every extra token makes a sum lower, so without the division short paths would always win." },
      { text: "A both times: its total is higher.", why: "Its total is higher, but with penalty 1 the total is divided by the length: −0.50 per token for A against −0.45 for B." },
      { text: "B both times: the longer path always wins.", why: "With penalty 0 there is no division at all, and −3.6 is below −2.0: the shorter path wins. Longer paths have more log-probabilities, each negative, to add up." },
    ],
    link: { href: "#beam", text: "Try length penalties in the beam search" },
  },
  {
    id: "beam_repeat",
    ask: "Beam search found a text the model finds likelier per token than greedy decoding’s, and the text repeats a phrase. Why do chat models usually sample instead?",
    choices: [
      { text: "The likeliest text is often dull and loops: chasing probability rewards repeats, while sampling keeps the variety of human text.", right: true, why: "A repeated phrase becomes very likely once it has been said, so a search for probability walks into loops. No repeat n-gram only bans exact repeats of n tokens; it does not make the text varied. Beam search still suits tasks with one right answer and short outputs, such as translation." },
      { text: "Beam search cannot use a KV cache.", why: "It uses one: each beam has a row of the same cache, and after every step the rows are copied to follow the beams that survived." },
      { text: "Only speed: N beams cost N times the work.", why: "They cost more, but a batch of N rows runs well on the same hardware. The reason is the text: the likeliest text is not the best to read." },
    ],
    link: { href: "#beam", text: "Compare beam, greedy and sampled" },
  },
  {
    id: "spec_accept",
    ask: "The draft proposes a token it gave q = 0.5; the model gives the same token p = 0.2. With what chance, in percent, is the guess kept?",
    answer: 40,
    tolerance: 0.5,
    unit: "%",
    hint: "A number from 0 to 100.",
    right: "min(1, p / q) = min(1, 0.2 / 0.5) = 0.4: 40%. The draft proposed it 2.5 times too often, so only 2 in 5 proposals are kept; when it is turned down, the token comes from max(0, p − q) instead, and together the token comes out with the model’s own 20%.",
    wrongs: {
      20: "20% is p itself. The guess was already drawn with chance q, so it is kept with p / q of that: 0.2 / 0.5.",
      100: "Kept for sure only when the model likes it at least as much as the draft (p ≥ q). Here p < q.",
      250: "q / p is upside down: the chance is p / q, and at most 1.",
    },
    wrong: "The rule is min(1, p / q): the model’s chance over the draft’s, at most 1.",
    link: { href: "#speculative", text: "See p, q and the draw of every guess" },
  },
  {
    id: "spec_greedy",
    ask: "Can greedy speculative decoding write a different text from greedy decoding without a draft?",
    choices: [
      { text: "No: every kept guess is the model’s own likeliest token, and at the first that is not, the model’s likeliest is taken instead.", right: true, why: "The draft only decides how many tokens one pass of the model can confirm. A poor draft costs passes, never text. Sampled, the same holds for the distribution: each token comes out exactly as likely as the model alone would make it." },
      { text: "Yes: a poor draft makes the text worse.", why: "A poor draft is turned down more often, which costs speed: the model then supplies the token itself. The text is the model’s." },
      { text: "Yes, a little: cutting the cache back loses precision.", why: "Cutting back only forgets keys and values of guesses turned down; the positions kept are the same numbers as before. The cache check compares every round with a full recomputation." },
    ],
    link: { href: "#speculative", text: "Decode with the draft" },
  },
  {
    id: "paged_room",
    ask: "A request’s cache holds 70 positions, in blocks of 16 positions. How many positions has it reserved that are still empty?",
    answer: 10,
    tolerance: 0,
    unit: "positions",
    hint: "A whole number.",
    right: "70 positions need 5 blocks (4 full ones hold 64, the fifth holds 6), and 5 blocks hold 80: 10 are reserved and empty. That is the only waste of a paged cache, at most one block less one position per request; a cache sized for a 128-position window would leave 58 empty.",
    wrongs: {
      6: "6 is how many positions the last block holds. The question is how many it still has room for.",
      58: "58 is what a cache reserved for the whole 128-position window leaves empty. A paged cache only holds the blocks it has filled or is filling.",
      0: "Blocks are taken whole: the fifth block is taken at position 65 and is only partly filled.",
    },
    wrong: "Count the blocks first: 70 positions fill 4 blocks of 16 and part of a fifth.",
    link: { href: "#serving", text: "See the block tables step by step" },
  },
  {
    id: "paged_cow",
    ask: "Four samples of one prompt share its 40 positions, in blocks of 16. The first sample writes its first new token. What is copied?",
    choices: [
      { text: "One block: the third, which holds positions 32 to 39 and has room left. The two full blocks stay shared.", right: true, why: "The new token goes to position 40, in the third block, which the other samples still hold: writing there would change their cache, so the writer gets its own copy first. Full blocks are never written again, so all four samples read them for good." },
      { text: "Nothing: all four samples keep writing into the shared blocks.", why: "Their next tokens differ, so they cannot share the block the new tokens go into. A shared block is copied before anyone writes into it." },
      { text: "All three blocks: a sample needs its own cache.", why: "That is what a cache of one array per sequence does. Copy-on-write copies only the block about to be written into." },
    ],
    link: { href: "#serving", text: "Serve samples and watch the copies" },
  },
  {
    id: "paged_preempt",
    ask: "The pool runs out of blocks in the middle of a step, and the scheduler preempts the youngest request. What happens to the text that request writes?",
    choices: [
      { text: "Nothing: it keeps the tokens it has, waits, and its window is computed again in one pass when it joins again. It costs time, not words.", right: true, why: "Its draws come from its own seed and its tokens are kept, and computing the window again gives the same keys and values. The page’s run checks every request against the same request run alone." },
      { text: "It starts again from its prompt and writes a different text.", why: "It keeps the tokens it had made; only its keys and values are given back. When it joins again they are computed again from those tokens." },
      { text: "It goes on with a shorter cache, so its text degrades.", why: "A preempted request does not decode at all until it joins again with its whole window computed." },
    ],
    link: { href: "#serving", text: "Give the pool less memory" },
  },
];

export function createQuestions({ playground }) {
  const answered = []; // listeners to checked answers
  const list = $("quiz-list");
  const score = $("quiz-score");
  const results = {}; // id -> true | false, for the questions checked
  const parts = {}; // id -> {q, form, input, mark}
  let shown = QUESTIONS.map((q) => q.id); // a widget may show fewer (?question=)

  function updateScore() {
    const total = shown.length;
    const checked = shown.filter((id) => id in results);
    const right = checked.filter((id) => results[id]).length;
    if (total === 1) {
      score.textContent = checked.length ? "" : "Answer, then check: the answer explains itself.";
      return;
    }
    score.textContent = checked.length
      ? `${right} of ${total} right so far${checked.length < total ? ` (${total - checked.length} still open)` : ""}.`
      : `${total} questions. Answer in any order; each one explains itself.`;
  }

  function feedback(box, ok, text) {
    box.replaceChildren(el("strong", null, ok ? "✓ Correct. " : "✗ Not quite. "), text);
    box.className = `q-feedback ${ok ? "is-right" : "is-wrong"}`;
    box.hidden = false;
  }

  QUESTIONS.forEach((q, n) => {
    const form = el("form", "q");
    form.id = `q-${q.id}`;
    form.noValidate = true;
    const fieldset = el("fieldset");
    const legend = el("legend");
    legend.append(el("span", "q-num", `${n + 1}`), el("span", "q-ask", q.ask));
    fieldset.append(legend);
    const box = el("p", "q-feedback");
    box.id = `q-${q.id}-feedback`;
    box.setAttribute("role", "status");
    box.hidden = true;
    let input = null;
    if (q.choices) {
      const group = el("div", "q-choices");
      q.choices.forEach((c, i) => {
        const id = `q-${q.id}-${i}`;
        const radio = el("input");
        radio.type = "radio";
        radio.name = `q-${q.id}`;
        radio.id = id;
        radio.value = String(i);
        const label = el("label", null, c.text);
        label.htmlFor = id;
        const row = el("div", "q-choice");
        row.append(radio, label);
        group.append(row);
      });
      fieldset.append(group);
    } else {
      const row = el("div", "q-number");
      input = el("input");
      input.type = "text";
      input.inputMode = "decimal";
      input.autocomplete = "off";
      input.id = `q-${q.id}-answer`;
      const label = el("label", null, `Your answer (${q.unit})`);
      label.htmlFor = input.id;
      const hint = el("p", "hint", q.hint);
      hint.id = `q-${q.id}-hint`;
      input.setAttribute("aria-describedby", hint.id);
      row.append(label, input, hint);
      fieldset.append(row);
    }
    const foot = el("div", "q-foot");
    const check = el("button", null, "Check answer");
    check.type = "submit";
    foot.append(check);
    if (q.tryIt) {
      const tryButton = el("button", "quiet", "Try it in the playground");
      tryButton.type = "button";
      tryButton.addEventListener("click", () => playground.try(q.tryIt));
      foot.append(tryButton);
    }
    if (q.link) {
      const a = el("a", "q-link", q.link.text);
      a.href = q.link.href;
      foot.append(a);
    }
    fieldset.append(foot, box);
    form.append(fieldset);
    const mark = () => {
      for (const row of form.querySelectorAll(".q-choice")) row.classList.remove("is-right", "is-wrong");
      if (q.choices) {
        const picked = form.querySelector(`input[name="q-${q.id}"]:checked`);
        if (!picked) {
          box.className = "q-feedback";
          box.textContent = "Pick one of the answers first.";
          box.hidden = false;
          return;
        }
        const choice = q.choices[Number(picked.value)];
        picked.closest(".q-choice").classList.add(choice.right ? "is-right" : "is-wrong");
        results[q.id] = Boolean(choice.right);
        feedback(box, Boolean(choice.right), choice.why);
      } else {
        const text = input.value.trim().replace(",", ".");
        const x = Number(text);
        if (!text || !Number.isFinite(x)) {
          box.className = "q-feedback";
          box.textContent = `Type a number (${q.hint.replace(/\.$/, "")}).`;
          box.hidden = false;
          input.setAttribute("aria-invalid", "true");
          return;
        }
        input.removeAttribute("aria-invalid");
        const ok = Math.abs(x - q.answer) <= q.tolerance;
        results[q.id] = ok;
        feedback(box, ok, ok ? q.right : (q.wrongs[x] || q.wrong));
      }
      updateScore();
      for (const fn of answered) fn(q.id);
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      mark();
    });
    parts[q.id] = { q, form, input, mark };
    list.append(form);
  });
  updateScore();

  // --- the quiz as a host page sees it (embed.js, platforms.js) ----------------------------

  /** What is answered now: a choice's index, the number as typed, or null. */
  function answerOf(id) {
    const { q, form, input } = parts[id];
    if (q.choices) {
      const picked = form.querySelector(`input[name="q-${q.id}"]:checked`);
      return picked ? Number(picked.value) : null;
    }
    const text = input.value.trim();
    return text === "" ? null : text;
  }

  function rightOf(id, answer) {
    const { q } = parts[id];
    if (answer === null) return false;
    if (q.choices) return Boolean(q.choices[answer]?.right);
    const x = Number(String(answer).replace(",", "."));
    return Number.isFinite(x) && Math.abs(x - q.answer) <= q.tolerance;
  }

  /** The answers as they stand (checked or not), marked; only the questions shown count. */
  function grade() {
    const questions = shown.map((id) => {
      const answer = answerOf(id);
      return { id, answer, correct: rightOf(id, answer) };
    });
    const right = questions.filter((q) => q.correct).length;
    return {
      right, total: questions.length, answered: questions.filter((q) => q.answer !== null).length,
      score: questions.length ? right / questions.length : 0, questions,
    };
  }

  /** Everything needed to put the quiz back as it is: the answers, and which were checked. */
  function state() {
    const answers = {};
    for (const id of shown) {
      const a = answerOf(id);
      if (a !== null) answers[id] = a;
    }
    return { version: 1, answers, checked: shown.filter((id) => id in results) };
  }

  /**
   * Put a saved state back. Every part is checked first; a state with any problem changes
   * nothing and returns the problems, each naming what is wrong ([] when it applied).
   */
  function restore(saved) {
    const errors = [];
    const bad = (message) => errors.push({ field: "state", message });
    if (!saved || typeof saved !== "object" || Array.isArray(saved)) {
      bad("A quiz state must be an object like {\"answers\": {\"greedy\": 1}, \"checked\": [\"greedy\"]}.");
      return errors;
    }
    const answers = saved.answers ?? {};
    const checked = saved.checked ?? [];
    if (typeof answers !== "object" || Array.isArray(answers)) bad("answers must be an object of question: answer.");
    if (!Array.isArray(checked)) bad("checked must be a list of question names.");
    if (errors.length) return errors;
    const known = (id) => Object.hasOwn(parts, id);
    for (const [id, value] of Object.entries(answers)) {
      const part = known(id) ? parts[id] : null;
      if (!part) bad(`There is no question ${JSON.stringify(id)}; the questions are ${QUESTIONS.map((q) => q.id).join(", ")}.`);
      else if (part.q.choices && !(Number.isInteger(value) && value >= 0 && value < part.q.choices.length)) {
        bad(`The answer to ${id} must be a choice from 0 to ${part.q.choices.length - 1}; got ${JSON.stringify(value)}.`);
      } else if (!part.q.choices && !(typeof value === "string" && value.length <= 40)) {
        bad(`The answer to ${id} must be the number as typed, at most 40 characters; got ${JSON.stringify(value)}.`);
      }
    }
    for (const id of checked) {
      if (!known(id)) bad(`There is no question ${JSON.stringify(id)} to mark as checked.`);
    }
    if (errors.length) return errors;
    for (const id of Object.keys(results)) delete results[id];
    for (const { q, form, input } of Object.values(parts)) {
      for (const radio of form.querySelectorAll("input[type=radio]")) radio.checked = false;
      if (input) input.value = "";
      for (const row of form.querySelectorAll(".q-choice")) row.classList.remove("is-right", "is-wrong");
      const box = form.querySelector(".q-feedback");
      box.hidden = true;
      box.replaceChildren();
      if (q.choices && Number.isInteger(answers[q.id])) form.querySelector(`#q-${q.id}-${answers[q.id]}`).checked = true;
      else if (input && typeof answers[q.id] === "string") input.value = answers[q.id];
    }
    for (const id of checked) if (answerOf(id) !== null) parts[id].mark();
    updateScore();
    return [];
  }

  /** Show only these questions (a widget of one idea). */
  function only(ids) {
    shown = QUESTIONS.map((q) => q.id).filter((id) => ids.includes(id));
    for (const [id, { form }] of Object.entries(parts)) {
      form.hidden = !shown.includes(id);
      // numbered as they are shown: a widget's one question is its first
      form.querySelector(".q-num").textContent = String(shown.indexOf(id) + 1);
    }
    updateScore();
  }

  /** fn(id) after every checked answer (an embed tells its host the grade). */
  const onAnswer = (fn) => answered.push(fn);
  return { results, grade, state, restore, only, onAnswer, ids: QUESTIONS.map((q) => q.id) };
}
