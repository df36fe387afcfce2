/**
 * The Node client's SigV4 against a verifier: a dev server started with
 * ClientAuth AWS_IAM, which checks each signature as API Gateway does. Run by
 * tests/integration/test_client_signing_devserver.py, which passes the
 * server's URL, region and credentials.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { AuthError, HttpBackend, IamAuth, type JsonObject, Sequence } from "../../src/index.js";

const url = process.env["IDBLOCKS_IAM_URL"] ?? "";
const region = process.env["IDBLOCKS_IAM_REGION"] ?? "";
const accessKeyId = process.env["IDBLOCKS_IAM_ACCESS_KEY"] ?? "";
const secretAccessKey = process.env["IDBLOCKS_IAM_SECRET_KEY"] ?? "";
const skip = url ? false : "IDBLOCKS_IAM_URL is not set (tests/integration/test_client_signing_devserver.py sets it)";

const EVERY_CHARACTER = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";
const NAMES = [`n${EVERY_CHARACTER}`, "..node", ".n-_", "n".repeat(128)];

function nextOf(counter: JsonObject): bigint {
  return BigInt(counter["next"] as number | bigint);
}

function signed(options: { secret?: string; region?: string; minutes?: number } = {}): HttpBackend {
  const secret = options.secret ?? secretAccessKey;
  const minutes = options.minutes ?? 0;
  const auth = new IamAuth({
    region: options.region ?? region,
    credentials: () => Promise.resolve({ accessKeyId, secretAccessKey: secret }),
    signingDate: () => new Date(Date.now() + minutes * 60_000),
  });
  return new HttpBackend(url, { auth });
}

test("every route, names of every allowed character, a query with a cursor and bodies verify", { skip }, async () => {
  const backend = signed();
  for (const name of NAMES) {
    assert.equal(await backend.next(name), 1);
    const block = await backend.allocate(name, 3);
    assert.deepEqual([block.start, block.end], [2n, 4n]);
    assert.equal(nextOf(await backend.get(name)), 5n);
    assert.equal(nextOf(await backend.update(name, { next: 10, cache: 2 })), 10n);
  }
  assert.equal(nextOf(await backend.create("node-signed-admin", { start: 100 })), 100n);
  const seen: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await backend.list(cursor === undefined ? { limit: 1 } : { limit: 1, cursor });
    for (const counter of page["counters"] as { name: string }[]) seen.push(counter.name);
    const next = page["cursor"];
    if (typeof next !== "string") break;
    cursor = next;
  }
  for (const name of [...NAMES, "node-signed-admin"]) assert.ok(seen.includes(name), name);
  await backend.delete("node-signed-admin");
});

test("a Sequence over a signed backend hands out 1..7", { skip }, async () => {
  const seq = new Sequence(signed(), "node-signed-sequence", { blockSize: 5 });
  const ids: number[] = [];
  for (let i = 0; i < 7; i++) ids.push(await seq.next());
  await seq.close();
  assert.deepEqual(ids, [1, 2, 3, 4, 5, 6, 7]);
});

for (const [mistake, options] of [
  ["a wrong secret", { secret: `not-${secretAccessKey}` }],
  ["a wrong region", { region: "us-west-2" }],
  ["a clock seven minutes behind", { minutes: -7 }],
  ["a clock seven minutes ahead", { minutes: 7 }],
] as const) {
  test(`${mistake} is refused with the gateway's code`, { skip }, async () => {
    await assert.rejects(signed(options).allocate("node-refused", 3), (error: unknown) => {
      assert.ok(error instanceof AuthError, String(error));
      assert.equal(error.status, 403);
      assert.equal(error.code, "invalid_signature");
      return true;
    });
  });
}
