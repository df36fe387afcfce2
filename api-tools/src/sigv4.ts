/**
 * Signs each request of an openapi-fetch client with AWS Signature Version 4
 * (ClientAuth AWS_IAM, and the admin routes), as API Gateway checks it:
 *
 *   const client = createClient<paths>({ baseUrl: "https://abcde12345.execute-api.eu-west-1.amazonaws.com/v1" });
 *   client.use(sigv4({ region: "eu-west-1", credentials: fromNodeProviderChain() }));
 *
 * The request is signed as it will be sent: its method, its URL's path (the
 * stage included) and query, its body, Host, Content-Type and Idempotency-Key.
 */
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import type { Middleware } from "openapi-fetch";

type Credentials = ConstructorParameters<typeof SignatureV4>[0]["credentials"];

// Headers a hop may rewrite (Connection, Accept-Encoding...) are left unsigned.
const SIGNED_HEADERS = ["content-type", "idempotency-key"];

export function sigv4(options: { region: string; credentials: Credentials }): Middleware {
  const signer = new SignatureV4({
    service: "execute-api",
    region: options.region,
    credentials: options.credentials,
    sha256: Sha256,
  });
  return {
    async onRequest({ request }) {
      const url = new URL(request.url);
      const query: Record<string, string | string[]> = {};
      for (const key of new Set(url.searchParams.keys())) {
        const values = url.searchParams.getAll(key);
        query[key] = values.length === 1 ? (values[0] as string) : values;
      }
      const headers: Record<string, string> = { host: url.host };
      for (const name of SIGNED_HEADERS) {
        const value = request.headers.get(name);
        if (value !== null) headers[name] = value;
      }
      // The body is read from a copy: the request still sends its own.
      const body = request.body === null ? undefined : await request.clone().text();
      const signed = await signer.sign({
        method: request.method,
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port ? { port: Number(url.port) } : {}),
        path: url.pathname,
        query,
        headers,
        ...(body !== undefined ? { body } : {}),
      });
      // fetch sets Host itself, from the same URL.
      for (const [name, value] of Object.entries(signed.headers)) {
        if (name !== "host") request.headers.set(name, value);
      }
      return request;
    },
  };
}
