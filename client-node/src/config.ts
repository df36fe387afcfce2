/**
 * Settings checked when a backend is built, so that one that cannot work is
 * a ConfigurationError at once rather than a request retried for seconds and
 * reported as an outage ("the request may have been applied", though nothing
 * was ever sent).
 */

import { ConfigurationError } from "./errors.js";

/** The longest timer Node keeps (2^31 - 1 ms, 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_SECONDS = (2 ** 31 - 1) / 1000;

/**
 * Ports fetch refuses to connect to, whatever the server (the Fetch
 * standard's "bad port" list, https://fetch.spec.whatwg.org/#bad-port):
 * an endpoint on one of them could never be reached.
 */
const BAD_PORTS: ReadonlySet<number> = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110,
  111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532,
  540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061,
  6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

// A DNS name: dot-separated labels of 1-63 letters, digits, '-' or '_' (for
// private names), neither starting nor ending with '-'; a final dot allowed.
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/**
 * `endpoint` without its trailing slashes, if a request can go to it: an
 * http(s) URL with a host name or address, a port fetch may use, and
 * neither user info, query nor fragment (the routes' paths are appended to
 * it). Else ConfigurationError.
 */
export function checkEndpoint(endpoint: unknown): string {
  const refuse = (why: string): never => {
    throw new ConfigurationError(
      `endpoint ${JSON.stringify(endpoint)} cannot be used: ${why}; it must be the http(s) URL of the API ` +
        "(such as https://abc123.execute-api.eu-west-1.amazonaws.com/v1, or http://127.0.0.1:3000 for make dev)",
    );
  };
  if (typeof endpoint !== "string") return refuse("it is not a string");
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    // A port above 65535 lands here too: the URL parser refuses it.
    return refuse("it is not a URL, or its port is not 1-65535");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return refuse(`its scheme is ${url.protocol}`);
  if (url.username || url.password) return refuse("it has a user name or password in it");
  if (url.search || url.hash || endpoint.includes("?") || endpoint.includes("#")) {
    return refuse("it has a query or a fragment");
  }
  if (!hostOk(url.hostname)) return refuse(`its host name ${JSON.stringify(url.hostname)} is not a valid one`);
  const port = url.port ? Number(url.port) : undefined;
  if (port === 0) return refuse("its port is 0");
  if (port !== undefined && BAD_PORTS.has(port)) return refuse(`fetch refuses to connect to port ${port}`);
  return endpoint.replace(/\/+$/, "");
}

function hostOk(host: string): boolean {
  // The URL parser has already checked IP addresses ([v6], and v4 in any form it reads).
  if (host.startsWith("[")) return true;
  const name = host.endsWith(".") ? host.slice(0, -1) : host;
  return name.length > 0 && name.length <= 253 && name.split(".").every((label) => LABEL.test(label));
}

/** Seconds one attempt may take: a positive number up to MAX_TIMER_SECONDS. */
export function checkTimeout(timeout: unknown): number {
  if (typeof timeout !== "number" || !(timeout > 0 && timeout <= MAX_TIMER_SECONDS)) {
    throw new ConfigurationError(
      `timeout must be a number of seconds above 0 and at most ${MAX_TIMER_SECONDS} (24.8 days), not ${String(timeout)}`,
    );
  }
  return timeout;
}

// An AWS region's name: "eu-west-1", "us-gov-west-1", "cn-north-1", "eusc-de-east-1".
const REGION = /^[a-z]{2,4}(-[a-z]+)+-\d{1,2}$/;

/** `region` if it is shaped as an AWS region's name; else ConfigurationError, saying where it came from. */
export function checkRegion(region: string, source: string): string {
  if (!REGION.test(region)) {
    throw new ConfigurationError(`${source} ${JSON.stringify(region)} is not an AWS region name (such as eu-west-1)`);
  }
  return region;
}
