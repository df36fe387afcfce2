import assert from "node:assert/strict";
import { after, before, beforeEach, test } from "node:test";

import {
  ApiKeyAuth,
  AuthError,
  ConfigurationError,
  Conflict,
  CounterExhausted,
  CounterNotFound,
  HttpBackend,
  IamAuth,
  InvalidName,
  InvalidRequest,
  MissingCredentials,
  MissingRegion,
  RetryPolicy,
  Sequence,
  ServiceError,
  ServiceUnavailable,
  UnexpectedResponse,
  parseRetryAfter,
} from "../../src/index.js";
import { type Answer, StubServer, json, serviceError } from "../stub-server.js";

const stub = new StubServer();
let url = "";
let slept: number[] = [];

before(async () => {
  url = await stub.start();
});
after(async () => {
  await stub.stop();
});
beforeEach(() => {
  stub.received.length = 0;
  stub.answers.length = 0;
  slept = [];
});

/** A backend whose waits are recorded, not slept. */
function backend(options: { auth?: ApiKeyAuth | IamAuth; deadline?: number; timeout?: number } = {}): HttpBackend {
  const retry = new RetryPolicy({
    base: 0.01,
    deadline: options.deadline ?? 30,
    random: () => 0.5,
    now: () => Date.parse("2026-11-23T12:00:00Z") / 1000,
    sleep: (seconds) => {
      slept.push(seconds);
      return Promise.resolve();
    },
  });
  return new HttpBackend(url, { retry, timeout: options.timeout ?? 10, ...(options.auth ? { auth: options.auth } : {}) });
}

const block = (start: number | string, end: number | string, step = 1): string =>
  `{"counter":"c","start":${start},"end":${end},"count":1,"step":${step}}`;

test("a block request is retried after 503, 429 and a dropped connection with the same Idempotency-Key", async () => {
  stub.script(
    serviceError(503, "service_unavailable"),
    json(429, { message: "Too Many Requests" }),
    { status: 0, drop: true },
    { status: 200, body: block(11, 20) },
  );
  const got = await backend().allocate("orders", 10, { idempotencyKey: "key-1" });
  assert.deepEqual(got, { start: 11n, end: 20n, step: 1n, capacityRefusals: 2 });
  assert.equal(stub.received.length, 4);
  assert.ok(stub.received.every((r) => r.headers["idempotency-key"] === "key-1"));
  assert.ok(stub.received.every((r) => r.body === '{"count":10}' && r.url === "/counters/orders/batch"));
});

test("an attempt that gets no answer within the timeout is abandoned and sent again with the same key", async () => {
  // (Answers to spare: on a loaded machine a quick answer may take longer than the timeout too.)
  const answered: Answer = { status: 200, body: block(1, 5) };
  stub.script({ status: 0, hang: true }, answered, answered, answered);
  const got = await backend({ timeout: 0.5 }).allocate("orders", 5, { idempotencyKey: "slow-key" });
  assert.equal(got.end, 5n);
  assert.ok(stub.received.length >= 2);
  assert.ok(stub.received.every((r) => r.headers["idempotency-key"] === "slow-key"));
});

test("Retry-After is obeyed, as seconds and as an HTTP date", async () => {
  stub.script(
    serviceError(503, "service_unavailable", { "retry-after": "2" }),
    serviceError(409, "request_in_progress", { "retry-after": "Mon, 23 Nov 2026 12:00:03 GMT" }),
    { status: 200, body: block(1, 1) },
  );
  await backend().allocate("orders", 1, { idempotencyKey: "k" });
  assert.deepEqual(slept, [2, 3]);
});

test("parseRetryAfter reads seconds and dates, and nothing else", () => {
  const now = Date.parse("2026-11-23T12:00:00Z") / 1000;
  assert.equal(parseRetryAfter("120", now), 120);
  assert.equal(parseRetryAfter("Mon, 23 Nov 2026 12:00:30 GMT", now), 30);
  assert.equal(parseRetryAfter("Mon, 23 Nov 2026 11:00:00 GMT", now), 0);
  assert.equal(parseRetryAfter("-5", now), undefined);
  assert.equal(parseRetryAfter("soon", now), undefined);
  assert.equal(parseRetryAfter(null, now), undefined);
});

test("a Retry-After past the deadline is not waited: ServiceUnavailable says so", async () => {
  stub.script(serviceError(503, "service_unavailable", { "retry-after": "60" }));
  await assert.rejects(backend({ deadline: 5 }).allocate("orders", 1, { idempotencyKey: "k" }), (error: unknown) => {
    assert.ok(error instanceof ServiceUnavailable);
    assert.match(error.message, /past the 5 s deadline/);
    assert.equal(error.capacityRefusals, 1);
    return true;
  });
  assert.deepEqual(slept, []);
});

for (const [status, code, type] of [
  [400, "invalid_count", InvalidRequest],
  [403, "access_denied", AuthError],
  [404, "counter_not_found", CounterNotFound],
  [409, "counter_exhausted", CounterExhausted],
  [409, "region_mismatch", Conflict],
  [422, "idempotency_key_reused", InvalidRequest],
] as const) {
  test(`${status} ${code} is ${type.name}, with the service's code, not retried`, async () => {
    stub.script(serviceError(status, code));
    await assert.rejects(backend().allocate("orders", 1, { idempotencyKey: "k" }), (error: unknown) => {
      assert.ok(error instanceof type);
      assert.ok(error instanceof ServiceError);
      assert.equal(error.status, status);
      assert.equal(error.code, code);
      return true;
    });
    assert.equal(stub.received.length, 1);
  });
}

test("a 500 is retried for a keyed request, three times at most", async () => {
  stub.script(serviceError(500, "internal_error"), serviceError(500, "internal_error"), serviceError(500, "internal_error"));
  await assert.rejects(backend().allocate("orders", 1, { idempotencyKey: "k" }), ServiceUnavailable);
  assert.equal(stub.received.length, 3);
});

test("a create whose answer is unknown is not repeated", async () => {
  stub.script({ status: 0, drop: true });
  await assert.rejects(backend().create("orders"), /may have been applied/);
  assert.equal(stub.received.length, 1);
});

test("list asks for deleted counters only when told to, as the Python client does", async () => {
  const page = { status: 200, body: '{"counters":[],"cursor":null}' };
  stub.script(page, page, page);
  await backend().list({ limit: 5, deleted: true });
  await backend().list({ deleted: false });
  await backend().list();
  assert.deepEqual(
    stub.received.map((r) => r.url),
    ["/admin/counters?limit=5&deleted=true", "/admin/counters", "/admin/counters"],
  );
});

test("update sends deleted only when told to, as the Python client does", async () => {
  const state = { status: 200, body: '{"name":"orders","next":41,"deleted":true}' };
  stub.script(state, state);
  await backend().update("orders", { next: 41, deleted: true });
  await backend().update("orders", { next: 41, deleted: false });
  assert.deepEqual(
    stub.received.map((r) => r.body),
    ['{"next":41,"deleted":true}', '{"next":41}'],
  );
});

test("IDs beyond 2^53 - 1 are read exactly, as bigints", async () => {
  stub.script({ status: 200, body: block("9007199254740993", "9007199254741002") });
  const got = await backend().allocate("orders", 10, { idempotencyKey: "k" });
  assert.equal(got.start, 9_007_199_254_740_993n);
  assert.equal(got.end, 9_007_199_254_741_002n);
});

test("a 2xx the client cannot read is UnexpectedResponse", async () => {
  stub.script({ status: 200, body: "<html>" }, json(200, { start: 5 }), json(200, { start: 5, end: 4 }));
  for (let i = 0; i < 3; i++) {
    await assert.rejects(backend().allocate("orders", 1, { idempotencyKey: "k" }), UnexpectedResponse);
  }
});

test("a name the service refuses is refused before anything is sent", async () => {
  for (const name of ["", ".", "..", "a b", "x".repeat(129), "a/b"]) {
    await assert.rejects(backend().allocate(name, 1, { idempotencyKey: "k" }), InvalidName);
  }
  assert.equal(stub.received.length, 0);
});

test("ApiKeyAuth sends the key in x-api-key", async () => {
  stub.script({ status: 200, body: block(1, 1) });
  await backend({ auth: new ApiKeyAuth("secret-key") }).allocate("orders", 1, { idempotencyKey: "k" });
  assert.equal(stub.received[0]?.headers["x-api-key"], "secret-key");
});

test("IamAuth signs for execute-api with the SDK's signer: credential scope, date, session token, signed body", async () => {
  stub.script({ status: 200, body: block(1, 1) });
  const auth = new IamAuth({
    region: "eu-west-1",
    credentials: () => Promise.resolve({ accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret", sessionToken: "token" }),
    signingDate: () => new Date("2026-11-23T12:00:00Z"),
  });
  await backend({ auth }).allocate("orders", 1, { idempotencyKey: "k" });
  const headers = stub.received[0]?.headers ?? {};
  assert.match(
    String(headers["authorization"]),
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20261123\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
  );
  assert.equal(headers["x-amz-date"], "20261123T120000Z");
  assert.equal(headers["x-amz-security-token"], "token");
  assert.match(String(headers["x-amz-content-sha256"] ?? ""), /^$|^[0-9a-f]{64}$/);
});

test("IamAuth without credentials anywhere is MissingCredentials, and the Sequence tells its callers", async () => {
  const auth = new IamAuth({ region: "eu-west-1", credentials: () => Promise.reject(new Error("Could not load credentials")) });
  const seq = new Sequence(backend({ auth }), "orders", { prefetch: false });
  await assert.rejects(seq.next(), MissingCredentials);
  assert.equal(stub.received.length, 0);
  await seq.close();
});

test("IamAuth names its region from a private API's endpoint-specific host, and signs for it over that host", async () => {
  const saved = { AWS_REGION: process.env["AWS_REGION"], AWS_DEFAULT_REGION: process.env["AWS_DEFAULT_REGION"] };
  delete process.env["AWS_REGION"];
  delete process.env["AWS_DEFAULT_REGION"];
  try {
    const auth = new IamAuth({
      credentials: () => Promise.resolve({ accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" }),
      signingDate: () => new Date("2026-11-23T12:00:00Z"),
    });
    const cases: [string, string][] = [
      ["https://a1b2c3d4e5-vpce-0123456789abcdef0.execute-api.eu-west-2.amazonaws.com/v1", "eu-west-2"],
      ["https://a1b2c3d4e5-vpce-11112222.execute-api.cn-north-1.amazonaws.com.cn/v1", "cn-north-1"],
    ];
    for (const [url, region] of cases) {
      assert.equal(auth.regionFor(url), region);
      const headers = await auth.headers("POST", `${url}/counters/orders/next`, undefined);
      assert.match(String(headers["authorization"]), new RegExp(`/20261123/${region}/execute-api/aws4_request, SignedHeaders=[a-z0-9;-]*host`));
    }
    for (const url of ["https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com.example.com/v1", "https://a1b2c3d4e5-other.execute-api.eu-west-1.amazonaws.com/v1"]) {
      assert.throws(() => new HttpBackend(url, { auth: new IamAuth() }), MissingRegion);
    }
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) Reflect.deleteProperty(process.env, key);
      else process.env[key] = value;
    }
  }
});

test("IamAuth names its region from the execute-api host, else the environment, else refuses at construction", () => {
  const saved = { AWS_REGION: process.env["AWS_REGION"], AWS_DEFAULT_REGION: process.env["AWS_DEFAULT_REGION"] };
  delete process.env["AWS_REGION"];
  delete process.env["AWS_DEFAULT_REGION"];
  try {
    assert.equal(new IamAuth().regionFor("https://abc123.execute-api.ap-south-1.amazonaws.com/v1"), "ap-south-1");
    assert.throws(() => new HttpBackend("https://ids.example.com/v1", { auth: new IamAuth() }), MissingRegion);
    process.env["AWS_DEFAULT_REGION"] = "us-west-2";
    assert.equal(new IamAuth().regionFor("https://ids.example.com/v1"), "us-west-2");
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) Reflect.deleteProperty(process.env, key);
      else process.env[key] = value;
    }
  }
});

test("an endpoint that is not an http(s) URL is refused as a ConfigurationError", () => {
  assert.throws(() => new HttpBackend("ftp://example.com"), ConfigurationError);
  assert.throws(() => new HttpBackend("not a url"), ConfigurationError);
});
