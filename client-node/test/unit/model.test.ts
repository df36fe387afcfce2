/**
 * The Sequence against a model: random programs of next(), take(n), abort,
 * close(timeout), drain() and time passing, over a service that answers each block
 * request as the program says (the block, or after throttling; taken with
 * the answer lost or unreadable; of the wrong size; refused for capacity, or
 * with a Retry-After; CounterExhausted or invalid_count when the counter or
 * the service says so), with other clients taking IDs in between and the
 * counter moving back (restored from a backup) now and then. After
 * every step the promises of test/model/record.ts are checked; at the end
 * every request is answered and every call must have ended, and a last
 * close() accounts for every ID the service took.
 *
 * Time is a clock the program moves (ManualTimers): nothing depends on the
 * machine's speed. A modest number of programs here; IDBLOCKS_SOAK=1 runs
 * many more. A failure prints the seed and the shrunk program; to run the
 * same programs again, IDBLOCKS_MODEL_SEED=<seed> (with IDBLOCKS_SOAK=1 if
 * that is how it was found).
 */

import { test } from "node:test";

import fc from "fast-check";

import { IdRange, Sequence, type SequenceOptions } from "../../src/index.js";
import { ManualTimers } from "../manual-timers.js";
import { Record } from "../model/record.js";
import { ModelService, type Reply } from "../model/service.js";

const SOAK = process.env["IDBLOCKS_SOAK"] === "1";
const RUNS = SOAK ? 50_000 : 500;

interface Setup {
  options: SequenceOptions & { bigint?: false };
  /** The counter's max, and the service's MaxBatchSize. */
  max: number;
  maxBatch: number;
}

/** The system under test, and what was seen of it. */
class Run {
  readonly timers = new ManualTimers();
  readonly service: ModelService;
  readonly seq: Sequence;
  readonly record: Record;

  constructor(setup: Setup) {
    this.service = new ModelService(setup.max, setup.maxBatch);
    this.seq = new Sequence(this.service, "model", { ...setup.options, timers: this.timers });
    this.record = new Record(this.seq, this.service, this.timers);
  }

  #closes = 0;

  close(timeout: number): Promise<number> {
    this.record.closed = true;
    const closing = this.seq.close(timeout);
    this.record.close(this.#closes++, closing);
    return closing;
  }

  async step(name: string): Promise<void> {
    await this.timers.settle();
    this.record.check(name);
  }
}

type Model = object;

/** One step of a program. */
function command(name: string, act: (run: Run) => unknown): fc.AsyncCommand<Model, Run> {
  return {
    check: () => true,
    run: async (_model, run) => {
      await act(run);
      await run.step(name);
    },
    toString: () => name,
  };
}

function call(run: Run, take: number | undefined, abortable: boolean): void {
  const controller = abortable ? new AbortController() : undefined;
  const options = controller ? { signal: controller.signal } : undefined;
  const promise: Promise<number | IdRange<number>> = take === undefined ? run.seq.next(options) : run.seq.take(take, options);
  run.record.call(take !== undefined, take ?? 1, promise, controller);
}

const reply: fc.Arbitrary<Reply> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Reply>({ kind: "block" }) },
  { weight: 1, arbitrary: fc.constant<Reply>({ kind: "throttled" }) },
  { weight: 2, arbitrary: fc.constant<Reply>({ kind: "lost" }) },
  { weight: 1, arbitrary: fc.constant<Reply>({ kind: "garbled" }) },
  { weight: 1, arbitrary: fc.constant<Reply>({ kind: "refused" }) },
  { weight: 1, arbitrary: fc.constantFrom(0.5, 10, 120).map((seconds): Reply => ({ kind: "retryAfter", seconds })) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 5 }).map((by): Reply => ({ kind: "wrongSize", by })) },
);

const next = fc
  .boolean()
  .map((abortable) => command(`next(${abortable ? "abortable" : ""})`, (run) => {
    call(run, undefined, abortable);
  }));

const take = fc
  .tuple(fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 30 }) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 2_000 }) }), fc.boolean())
  .map(([n, abortable]) => command(`take(${n}${abortable ? ", abortable" : ""})`, (run) => {
    call(run, n, abortable);
  }));

const abort = fc.nat().map((which) => command(`abort(#${which} of the abortable calls waiting)`, (run) => {
  const abortable = run.record.waiting.filter((waiting) => waiting.controller !== undefined);
  abortable[which % Math.max(1, abortable.length)]?.controller?.abort();
}));

// Not awaited: a close may wait for an answer a later step gives.
const close = fc.constantFrom(0, 0.5, 10, Infinity).map((timeout) => command(`close(${timeout})`, (run) => {
  void run.close(timeout);
}));

// The process is about to stop: it drains, and goes on serving.
const drain = fc.constant(command("drain()", (run) => {
  run.seq.drain();
}));

const advance = fc
  .constantFrom(0.001, 0.05, 0.5, 2, 10, 61, 301)
  .map((seconds) => command(`advance(${seconds} s)`, (run) => run.timers.advance(seconds)));

const answer = reply.map((how) => command(`answer(${JSON.stringify(how)})`, (run) => run.service.answer(how)));

const othersTake = fc.integer({ min: 1, max: 60 }).map((count) => command(`othersTake(${count})`, (run) => {
  run.service.othersTake(count);
}));

// The counter moves back, as a table restored from an earlier backup.
const moveBack = fc.constantFrom(1, 10, 100).map((by) => command(`moveBack(${by})`, (run) => {
  run.service.moveBack(by);
}));

const commands = fc.commands(
  [
    fc.oneof(
      { weight: 12, arbitrary: next },
      { weight: 6, arbitrary: take },
      { weight: 2, arbitrary: abort },
      { weight: 1, arbitrary: close },
      { weight: 1, arbitrary: drain },
      { weight: 8, arbitrary: advance },
      { weight: 16, arbitrary: answer },
      { weight: 2, arbitrary: othersTake },
      { weight: 1, arbitrary: moveBack },
    ),
  ],
  { maxCommands: 80, size: "large" },
);

const setups: fc.Arbitrary<Setup> = fc.record({
  options: fc.record({
    prefetch: fc.boolean(),
    prefetchAt: fc.constantFrom(0, 0.25, 0.5, 0.9, 1),
    waitTimeout: fc.constantFrom(0.5, 5, 60, Infinity),
    initialBlock: fc.constantFrom(1, 5, 20, 100),
    minBlock: fc.constant(1),
    maxBlock: fc.constantFrom(100, 500),
  }),
  max: fc.constantFrom(30, 60, 120, 1e9),
  maxBatch: fc.constantFrom(16, 100, 1_000_000),
});

/** The end of a program: every request answered and time moving on, until every call has ended; then a close() that counts everything. */
async function finish(run: Run): Promise<void> {
  const { record, service, timers } = run;
  for (let i = 0; i < 500 && (record.waiting.length > 0 || service.onNetwork.length > 0); i++) {
    service.answer({ kind: "block" });
    await timers.advance(100);
  }
  await run.step("answering every request until every call ended");
  if (record.waiting.length > 0) throw new Error(`calls never ended: #${record.waiting.map((c) => c.index).join(", #")}`);
  let unused: number | undefined;
  void run.close(Infinity).then((count) => (unused = count));
  for (let i = 0; i < 50 && unused === undefined; i++) {
    service.answer({ kind: "block" });
    await timers.advance(1);
  }
  await run.step("the last close()");
  if (unused === undefined) throw new Error("the last close() never resolved, though every request was answered");
  if (service.undelivered !== 0 || service.onNetwork.length !== 0) throw new Error("a request is left unanswered after close");
  if (timers.pending !== 0) throw new Error(`${timers.pending} timers left behind by a closed Sequence`);
}

test(`the Sequence keeps its promises in ${RUNS} random programs against a model`, async () => {
  const seed = process.env["IDBLOCKS_MODEL_SEED"];
  await fc.assert(
    fc.asyncProperty(setups, commands, async (setup, program) => {
      const run = new Run(setup);
      await fc.asyncModelRun(() => ({ model: {}, real: run }), program);
      await finish(run);
    }),
    { numRuns: RUNS, includeErrorInReport: true, ...(seed === undefined ? {} : { seed: Number(seed) }) },
  );
});
