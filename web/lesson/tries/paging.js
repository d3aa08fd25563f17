// The chapter Paging and prefix sharing's suggestions: block sizes and the prefix tree, too
// little memory and preemption, samples that share their prompt's blocks.

import { pct, plural } from "../../ui/render.js";

// The suggestions start from the seeded prose workload, the panel's other fields at Python's
// defaults, then change one thing.
const served = (page) => ({ ...page.serving().defaults(), dataset: "prose" });
const REFUSED = "the panel’s fields need fixing first: see the messages next to them";

async function servedTwice(page, change) {
  const first = await page.serving().serve(served(page));
  const then = await page.serving().serve(change);
  if (!first || !then) throw new Error(REFUSED);
  return [first, then];
}

export const TRIES = [
  {
    id: "prefix-tree",
    where: "serving",
    text: "Serve the seeded prose workload with blocks of 16 positions, then of 4. How much of the prompts does the prefix tree find each time, and how much memory does paging leave empty?",
    async act(page) {
      const [big, small] = await servedTwice(page, { block_size: 4 });
      return { big, small };
    },
    answer({ big, small }) {
      return {
        text: `Blocks of 16: the tree found ${pct(big.prefix_hit_rate)} of the prompts’ tokens, and ${pct(big.waste.paged)} of the paged memory was empty. Blocks of 4: ${pct(small.prefix_hit_rate)} found, ${pct(small.waste.paged)} empty. Smaller blocks share more, because only whole blocks go into the tree and a shared start rarely ends on a block’s edge, and they waste less, because only a request’s last block has room left. Reserving whole windows would have left ${pct(small.waste.contiguous_max)} empty. Serving engines still use blocks of 16 or so: every block is one more entry to look up when attention reads the table.`,
        evidence: [["#serving-stats", pct(small.waste.paged)]],
      };
    },
  },
  {
    id: "preempt",
    where: "serving",
    text: "Now give the pool less memory: blocks of 16 and Memory blocks 20, about two and a half windows for eight running requests. Who is preempted, and does their text change?",
    async act(page) {
      const [roomy, tight] = await servedTwice(page, { memory_blocks: 20 });
      return { roomy, tight };
    },
    answer({ roomy, tight }) {
      const hit = tight.requests.filter((r) => r.preempted);
      const same = tight.requests.every((r, i) => r.text === roomy.requests[i].text);
      return {
        text: hit.length
          ? `${plural(hit.length, "request was", "requests were")} preempted (${hit.map((r) => r.label).join(", ")}), ${plural(tight.preemptions, "time", "times")} in all; the run took ${tight.steps} steps instead of ${roomy.steps}. ${same ? "Every text is the same as with room to spare" : "Some texts differ from the roomy run, which should not happen"}: a preempted request keeps its tokens and its seed’s draws, and when it joins again its window is computed again in one pass, giving the same keys and values. Preemption costs time and computing, never words.`
          : `No request was preempted: with ${tight.memory_blocks} blocks there was room at every step. Try fewer memory blocks.`,
        evidence: [["#serving-stats", String(tight.preemptions)]],
      };
    },
  },
  {
    id: "samples",
    where: "serving",
    text: "Ask for 4 samples per request (blocks of 16, memory empty again). How many blocks are copied on write, and why so few?",
    async act(page) {
      const r = await page.serving().serve({ ...served(page), requests: 8, parallel_samples: 4 });
      if (!r) throw new Error(REFUSED);
      return r;
    },
    answer(r) {
      const prompts = r.runs / r.parallel_samples;
      return {
        text: `${prompts} prompts × 4 samples: each prompt was computed once and its blocks shared by its samples (at most ${r.blocks_shared} blocks shared at one step). Only ${plural(r.copies_on_write, "block was", "blocks were")} copied: full blocks are only read, so they stay shared for good; the one copied is a prompt’s last block when it still has room, once for each sample that writes into it while another still holds it, so at most 3 per prompt (the last sample writes in place). Without sharing, every sample would hold a copy of the whole prompt.`,
        evidence: [["#serving-stats", String(r.copies_on_write)]],
      };
    },
  },
];
