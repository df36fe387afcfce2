/** A scripted HTTP service on 127.0.0.1: each request gets the next scripted answer, and is recorded. */

import { type IncomingHttpHeaders, createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
  /** Close the connection without answering. */
  drop?: boolean;
  /** Never answer (until the server stops). */
  hang?: boolean;
}

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export class StubServer {
  readonly received: Received[] = [];
  readonly answers: Answer[] = [];
  readonly #server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      this.received.push({
        method: request.method ?? "",
        url: request.url ?? "",
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
      });
      const answer = this.answers.shift() ?? { status: 500, body: "no answer scripted" };
      if (answer.hang) return;
      if (answer.drop) {
        request.socket.destroy();
        return;
      }
      response.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
      response.end(answer.body ?? "");
    });
  });

  async start(): Promise<string> {
    await new Promise<void>((resolve) => {
      this.#server.listen(0, "127.0.0.1", resolve);
    });
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }

  script(...answers: Answer[]): void {
    this.answers.push(...answers);
  }
}

export const json = (status: number, body: unknown, headers?: Record<string, string>): Answer => ({
  status,
  body: typeof body === "string" ? body : JSON.stringify(body),
  ...(headers ? { headers } : {}),
});

export const serviceError = (status: number, code: string, headers?: Record<string, string>): Answer =>
  json(status, { error: { code, message: `${code} happened` } }, headers);
