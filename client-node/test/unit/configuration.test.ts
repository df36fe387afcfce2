/**
 * What the client is configured with is checked when it is built: a setting
 * that cannot work is a ConfigurationError at once, before any request,
 * never retried for seconds and reported as an outage. And a connection
 * refused on this machine says what is likely wrong, at once while nothing
 * has ever answered there (next() took 6 to 7 s to say it, and close() then
 * 13 s more), and retried as an outage once something has.
 */

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";

import {
  FailoverBackend,
  HttpBackend,
  IamAuth,
  type IamAuthOptions,
  IdBlocksError,
  RetryPolicy,
  Sequence,
  ServiceUnavailable,
} from "../../src/index.js";
import { StubServer, json } from "../stub-server.js";

/** ConfigurationError, by name (so that this file runs on a client without it, and fails there test by test). */
const configurationError = { name: "ConfigurationError" };

for (const endpoint of [
  "http://a..b",
  "http://127.0.0.1:99999",
  "http://127.0.0.1:0",
  "http://127.0.0.1:6000",
  "https://user:secret@ids.example.com/v1",
  "https://ids.example.com/v1?stage=prod",
  "https://-ids.example.com",
  "ftp://ids.example.com",
  "not a url",
  "",
]) {
  test(`the endpoint ${JSON.stringify(endpoint)} is refused when the backend is built`, () => {
    assert.throws(() => new HttpBackend(endpoint), (error: unknown) => {
      assert.ok(error instanceof IdBlocksError && error.name === "ConfigurationError", String(error));
      assert.ok(error.message.includes(JSON.stringify(endpoint)), error.message);
      return true;
    });
  });
}

test("endpoints a request can go to are accepted, without their trailing slashes", () => {
  for (const [endpoint, kept] of [
    ["http://127.0.0.1:3000", "http://127.0.0.1:3000"],
    ["http://localhost:3000/", "http://localhost:3000"],
    ["http://[::1]:3000", "http://[::1]:3000"],
    ["https://abc123.execute-api.eu-west-1.amazonaws.com/v1/", "https://abc123.execute-api.eu-west-1.amazonaws.com/v1"],
    ["http://ids_blue.internal:8080/api", "http://ids_blue.internal:8080/api"],
  ] as const) {
    assert.equal(new HttpBackend(endpoint).endpoint, kept);
  }
});

for (const timeout of [0, -1, Number.NaN, 1e10, Infinity]) {
  test(`a per-attempt timeout of ${timeout} s is refused when the backend is built`, () => {
    assert.throws(() => new HttpBackend("http://127.0.0.1:3000", { timeout }), configurationError);
  });
}

test("a malformed region is refused when IamAuth is built, or when HttpBackend reads it from the environment", () => {
  assert.throws(() => new IamAuth({ region: "eu west 1" }), configurationError);
  const saved = process.env["AWS_REGION"];
  process.env["AWS_REGION"] = "Europe (Ireland)";
  try {
    assert.throws(() => new HttpBackend("https://ids.example.com/v1", { auth: new IamAuth() }), configurationError);
  } finally {
    if (saved === undefined) Reflect.deleteProperty(process.env, "AWS_REGION");
    else process.env["AWS_REGION"] = saved;
  }
  assert.equal(new IamAuth({ region: "us-gov-west-1" }).regionFor("https://ids.example.com"), "us-gov-west-1");
});

test("a credential source that is not a function is refused when IamAuth is built", () => {
  const options = { region: "eu-west-1", credentials: "my-profile" } as unknown as IamAuthOptions;
  assert.throws(() => new IamAuth(options), configurationError);
});

/** A port on 127.0.0.1 with nothing listening (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => { resolve(); }));
  assert.ok(address !== null && typeof address === "object");
  return address.port;
}

test("a refused connection to this machine says nothing is listening, and asks whether the dev server is running", async () => {
  const port = await closedPort();
  const retry = new RetryPolicy({ attempts: 2, sleep: () => Promise.resolve() });
  const backend = new HttpBackend(`http://127.0.0.1:${port}`, { retry });
  await assert.rejects(backend.allocate("orders", 1, { idempotencyKey: "k" }), (error: unknown) => {
    assert.ok(error instanceof ServiceUnavailable);
    assert.match(
      error.message,
      new RegExp(
        `cannot connect to http://127\\.0\\.0\\.1:${port} \\(connect ECONNREFUSED [^)]*\\); ` +
          "nothing is listening there: is the dev server running\\? \\(`make dev` starts it\\)",
      ),
    );
    return true;
  });
});

/** A RetryPolicy as a user gets it (with `options`), whose back-offs are recorded (and waited). */
function recorded(options: { attempts?: number; firstContactAttempts?: number } = {}): { retry: RetryPolicy; slept: number[] } {
  const slept: number[] = [];
  const retry = new RetryPolicy({
    ...options,
    sleep: (seconds) => {
      slept.push(seconds);
      return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    },
  });
  return { retry, slept };
}

/** A ServiceUnavailable after `attempts` attempts; `neverAnswered` as said. */
const failedAfter = (attempts: number, neverAnswered: boolean) => (error: unknown) => {
  assert.ok(error instanceof ServiceUnavailable, String(error));
  assert.ok(error.message.includes(`after ${attempts} attempt(s)`), error.message);
  assert.equal(error.neverAnswered, neverAnswered);
  return true;
};

// Generous: the failure takes milliseconds; what keeps these tests from
// depending on the machine's speed is the count of attempts and back-offs.
const PROMPTLY = 3;

test("a refused connection where nothing has ever answered is tried once, with no back-off", async () => {
  const { retry, slept } = recorded();
  const backend = new HttpBackend(`http://127.0.0.1:${await closedPort()}`, { retry });
  await assert.rejects(backend.allocate("orders", 1, { idempotencyKey: "k" }), failedAfter(1, true));
  assert.deepEqual(slept, []);
  assert.equal(backend.contact.answered, false);
});

test("once the endpoint has answered, a refused connection is retried as any network error", async () => {
  const stub = new StubServer();
  const url = await stub.start();
  stub.script(json(200, { counter: "orders", start: 1, end: 1, count: 1 }));
  const { retry, slept } = recorded({ attempts: 3 });
  const answered = new HttpBackend(url, { retry });
  await answered.allocate("orders", 1, { idempotencyKey: "k" });
  await stub.stop();
  assert.equal(answered.contact.answered, true);
  // The same, on a port known to be closed: a backend whose endpoint has answered.
  const backend = new HttpBackend(`http://127.0.0.1:${await closedPort()}`, { retry });
  backend.contact.answered = true;
  await assert.rejects(backend.allocate("orders", 1, { idempotencyKey: "k" }), failedAfter(3, false));
  assert.equal(slept.length, 2);
});

test("firstContactAttempts lets a process wait for a server that starts after it", async () => {
  const { retry, slept } = recorded({ attempts: 5, firstContactAttempts: 3 });
  const backend = new HttpBackend(`http://127.0.0.1:${await closedPort()}`, { retry });
  await assert.rejects(backend.allocate("orders", 1, { idempotencyKey: "k" }), failedAfter(3, true));
  assert.equal(slept.length, 2);
  assert.throws(() => new RetryPolicy({ firstContactAttempts: 0 }), RangeError);
});

test("a Sequence's first next() where nothing listens is told at once, and close() then returns at once", async () => {
  const { retry, slept } = recorded();
  const seq = new Sequence(new HttpBackend(`http://127.0.0.1:${await closedPort()}`, { retry }), "orders");
  const started = performance.now();
  await assert.rejects(seq.next(), (error: unknown) => {
    assert.ok(error instanceof ServiceUnavailable, String(error));
    assert.match(error.message, /is the dev server running\?/);
    return true;
  });
  assert.equal(await seq.close(), 0);
  const elapsed = (performance.now() - started) / 1000;
  assert.deepEqual(slept, []);
  assert.ok(elapsed < PROMPTLY, `${elapsed} s`);
});

test("regions where nothing has ever answered fail over at once, and the whole never answered either", async () => {
  const { retry, slept } = recorded();
  const ports = [await closedPort(), await closedPort()];
  const backend = FailoverBackend.over(ports.map((port) => `http://127.0.0.1:${port}`), { retry });
  await assert.rejects(backend.allocate("orders", 1, { idempotencyKey: "k" }), (error: unknown) => {
    assert.ok(error instanceof ServiceUnavailable && error.neverAnswered, String(error));
    return true;
  });
  assert.deepEqual(slept, []);
});

test("https:// to a server that speaks plain HTTP is a ConfigurationError at once, naming the http:// URL to use", async () => {
  // As the dev server does, the stub answers a TLS handshake with a plain-text 400.
  const stub = new StubServer();
  const url = await stub.start();
  try {
    const { retry, slept } = recorded();
    const https = url.replace("http://", "https://");
    const seq = new Sequence(new HttpBackend(https, { retry }), "orders");
    const started = performance.now();
    await assert.rejects(seq.next(), (error: unknown) => {
      assert.ok(error instanceof IdBlocksError && error.name === "ConfigurationError", String(error));
      assert.ok(error.message.includes(`the server at ${https} answered in plain HTTP, not TLS: use ${url}`), error.message);
      return true;
    });
    await seq.close();
    const elapsed = (performance.now() - started) / 1000;
    assert.deepEqual(slept, []);
    assert.ok(elapsed < PROMPTLY, `${elapsed} s`);
    assert.deepEqual(stub.received, []);
    // A write whose TLS handshake failed was never sent: not "may have been applied".
    await assert.rejects(new HttpBackend(https, { retry }).create("orders"), configurationError);
  } finally {
    await stub.stop();
  }
});
