/**
 * What the client is configured with is checked when it is built: a setting
 * that cannot work is a ConfigurationError at once, before any request,
 * never retried for seconds and reported as an outage. And a connection
 * refused on this machine says what is likely wrong.
 */

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";

import { HttpBackend, IamAuth, type IamAuthOptions, IdBlocksError, RetryPolicy, ServiceUnavailable } from "../../src/index.js";

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
