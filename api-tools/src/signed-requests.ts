/**
 * Sends requests signed by the sigv4 middleware (src/sigv4.ts) to a server
 * that verifies SigV4 as API Gateway does (IDBLOCKS_URL: the dev server with
 * ClientAuth AWS_IAM), with the credentials and region given in the
 * environment, and prints what each was answered:
 * tests/integration/test_generated_clients.py reads it. IDBLOCKS_TAMPER
 * names one change made to a request after it was signed (body, path, query,
 * header, content-type), which the verifier must refuse.
 */
import createClient, { type Middleware } from "openapi-fetch";
import type { paths } from "../generated/idblocks.js";
import { sigv4 } from "./sigv4.js";

const { IDBLOCKS_URL, IDBLOCKS_NAME, IDBLOCKS_TAMPER = "" } = process.env;
const { AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN } = process.env;
if (!IDBLOCKS_URL || !IDBLOCKS_NAME || !AWS_REGION || !AWS_ACCESS_KEY_ID || !AWS_SECRET_ACCESS_KEY || !AWS_SESSION_TOKEN) {
  throw new Error("IDBLOCKS_URL, IDBLOCKS_NAME, AWS_REGION and the AWS_* credentials (with a session token) are needed");
}

/** The request as changed after signing, the way a hop that rewrites it would. */
async function tampered(request: Request): Promise<Request> {
  const url = new URL(request.url);
  const batch = url.pathname.endsWith("/batch");
  const body = request.body === null ? undefined : await request.clone().text();
  const headers = new Headers(request.headers);
  if (IDBLOCKS_TAMPER === "body" && batch) {
    return new Request(url, { method: request.method, headers, body: body?.replace("25", "26") ?? null });
  }
  if (IDBLOCKS_TAMPER === "path" && batch) {
    url.pathname = url.pathname.replace(`/${IDBLOCKS_NAME}/`, `/${IDBLOCKS_NAME}-other/`);
  } else if (IDBLOCKS_TAMPER === "query" && url.searchParams.has("limit")) {
    url.searchParams.set("limit", "2");
  } else if (IDBLOCKS_TAMPER === "header" && batch) {
    headers.set("idempotency-key", "key-2");
  } else if (IDBLOCKS_TAMPER === "content-type" && batch) {
    headers.set("content-type", "application/json; charset=utf-8");
  } else {
    return request;
  }
  return new Request(url, { method: request.method, headers, ...(body !== undefined ? { body } : {}) });
}

const tamper: Middleware = { onRequest: ({ request }) => tampered(request) };

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
client.use(tamper); // after signing

interface Answered {
  response: Response;
  error?: unknown;
  data?: unknown;
}

const answers: [number, string | null][] = [];
function seen(answered: Answered): void {
  const error = answered.error as { error?: { code?: string } } | undefined;
  answers.push([answered.response.status, error?.error?.code ?? null]);
}

const name = { path: { name: IDBLOCKS_NAME } };
// two counters, so that a listing of one has a cursor to send back
seen(await client.POST("/admin/counters", { body: { name: IDBLOCKS_NAME } }));
seen(await client.POST("/admin/counters", { body: { name: `${IDBLOCKS_NAME}-2` } }));
// a query, and a cursor in it, whose value needs encoding
const first = await client.GET("/admin/counters", { params: { query: { limit: 1 } } });
seen(first);
const cursor = first.data?.cursor ?? "none";
seen(await client.GET("/admin/counters", { params: { query: { limit: 1, cursor } } }));
// a body and a header of the API's own; no body; a body on PUT
seen(
  await client.POST("/counters/{name}/batch", {
    params: { ...name, header: { "idempotency-key": "key-1" } },
    body: { count: 25 },
  }),
);
seen(await client.POST("/counters/{name}/next", { params: name }));
seen(await client.PUT("/admin/counters/{name}", { params: name, body: { next: 7000, cache: 5 } }));
console.log(JSON.stringify(answers));
