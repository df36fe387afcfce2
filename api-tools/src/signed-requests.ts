/**
 * Sends requests signed by the sigv4 middleware (src/sigv4.ts) to a server
 * that records them (IDBLOCKS_URL, a stage path included), with the
 * credentials and region given in the environment:
 * tests/integration/test_generated_clients.py checks each signature against
 * botocore's for the request as it arrived.
 */
import createClient from "openapi-fetch";
import type { paths } from "../generated/idblocks.js";
import { sigv4 } from "./sigv4.js";

const { IDBLOCKS_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN } = process.env;
if (!IDBLOCKS_URL || !AWS_REGION || !AWS_ACCESS_KEY_ID || !AWS_SECRET_ACCESS_KEY || !AWS_SESSION_TOKEN) {
  throw new Error("IDBLOCKS_URL, AWS_REGION and the AWS_* credentials (with a session token) are needed");
}
const client = createClient<paths>({ baseUrl: IDBLOCKS_URL });
client.use(
  sigv4({
    region: AWS_REGION,
    credentials: {
      accessKeyId: AWS_ACCESS_KEY_ID,
      secretAccessKey: AWS_SECRET_ACCESS_KEY,
      sessionToken: AWS_SESSION_TOKEN,
    },
  }),
);

const name = { path: { name: "orders.2026_v-1" } };
// a query whose values need encoding; a body; a header of the API's own
await client.GET("/admin/counters", { params: { query: { limit: 5, cursor: "eyJuYW1lIjogIm9yZGVycyJ9" } } });
await client.POST("/counters/{name}/batch", {
  params: { ...name, header: { "idempotency-key": "key-1" } },
  body: { count: 25 },
});
await client.POST("/counters/{name}/next", { params: name });
await client.PUT("/admin/counters/{name}", { params: name, body: { next: 7000, cache: 5 } });
