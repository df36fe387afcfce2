/**
 * One scenario against a running API (IDBLOCKS_URL) with the client
 * openapi-typescript and openapi-fetch generate from docs/openapi.json,
 * untouched: what each step answered is printed as one JSON object, which
 * tests/integration/test_generated_clients.py holds to what the API must
 * answer (the same as for the generated Python client).
 *
 *   node dist/src/scenario.js <counter name>
 */
import createClient from "openapi-fetch";
import { ErrorCode, type components, type paths } from "../generated/idblocks.js";

type ErrorBody = components["schemas"]["ErrorBody"];

const baseUrl = process.env.IDBLOCKS_URL;
const name = process.argv[2];
if (!baseUrl || !name) throw new Error("usage: IDBLOCKS_URL=http://... node dist/src/scenario.js <counter name>");

const client = createClient<paths>({ baseUrl });
const counter = { params: { path: { name } } };
const codes: readonly string[] = Object.values(ErrorCode);

/** An error as the client typed it: its status, its code, and whether the code is one of ErrorCode's. */
function failure(response: Response, error: ErrorBody | undefined): [number, string, boolean] {
  if (error === undefined) throw new Error(`expected an error, got ${response.status}`);
  const code = error.error.code;
  return [response.status, code, codes.includes(code)];
}

function block(data: components["schemas"]["BatchResult"] | undefined): [number, number] {
  if (data === undefined) throw new Error("batch failed");
  return [data.start, data.end];
}

const created = await client.POST("/admin/counters", { body: { name } });
if (created.data === undefined) throw new Error(`create failed: ${created.response.status}`);

const ids: number[] = [];
for (let i = 0; i < 3; i += 1) {
  // no body: the operation declares none
  const { data } = await client.POST("/counters/{name}/next", counter);
  if (data === undefined) throw new Error("next failed");
  ids.push(data.id);
}

const keyed = { params: { path: { name }, header: { "idempotency-key": `scenario-${name}` } } };
const blocks = [
  block((await client.POST("/counters/{name}/batch", { ...keyed, body: { count: 10 } })).data),
  block((await client.POST("/counters/{name}/batch", { ...keyed, body: { count: 10 } })).data),
];

const read = (await client.GET("/admin/counters/{name}", counter)).data;
const updated = (await client.PUT("/admin/counters/{name}", { ...counter, body: { next: 1000, cache: 5 } })).data;
const reread = (await client.GET("/admin/counters/{name}", counter)).data;

const missing = await client.GET("/admin/counters/{name}", { params: { path: { name: `${name}-missing` } } });
const again = await client.POST("/admin/counters", { body: { name } });
const back = await client.PUT("/admin/counters/{name}", { ...counter, body: { next: 5 } });
const nothing = await client.PUT("/admin/counters/{name}", { ...counter, body: {} });
const zero = await client.POST("/counters/{name}/batch", { ...counter, body: { count: 0 } });
const reused = await client.POST("/counters/{name}/batch", { ...keyed, body: { count: 11 } });
// A code is usable as the enumeration: a switch over ErrorCode's members.
switch (again.error?.error.code) {
  case ErrorCode.counter_exists:
    break;
  default:
    throw new Error(`creating ${name} again: ${JSON.stringify(again.error)}`);
}

const deleted = await client.DELETE("/admin/counters/{name}", counter);
const gone = await client.GET("/admin/counters/{name}", counter);

console.log(
  JSON.stringify({
    created: [created.response.status, created.data.name, created.data.next],
    ids,
    blocks,
    read: [read?.next, read?.cache],
    updated: [updated?.next, updated?.cache],
    reread: [reread?.next, reread?.cache],
    errors: {
      "read a missing counter": failure(missing.response, missing.error),
      "create it again": failure(again.response, again.error),
      "move it back": failure(back.response, back.error),
      "update nothing": failure(nothing.response, nothing.error),
      "a batch of 0": failure(zero.response, zero.error),
      "reuse the key for another count": failure(reused.response, reused.error),
    },
    deleted: deleted.response.status,
    gone: failure(gone.response, gone.error),
  }),
);
