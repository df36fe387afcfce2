/**
 * Reading what the service answered: JSON read exactly (an ID above 2^53 - 1
 * arrives as a bigint, never rounded), the fields each route promises, the
 * service's error bodies; and the counter name rule, checked before sending.
 */

import { parse as parseJson, parseNumberAndBigInt, stringify as stringifyJson } from "lossless-json";

import type { Block } from "./block.js";
import { InvalidName, UnexpectedResponse } from "./errors.js";

export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function writeJson(body: Json): string {
  return stringifyJson(body) ?? "null";
}

function readJson(text: string): Json {
  return parseJson(text, null, parseNumberAndBigInt) as Json;
}

export function excerpt(data: unknown): string {
  const text = typeof data === "string" ? data : (stringifyJson(data) ?? String(data));
  return text.length > 120 ? `${text.slice(0, 120)}...` : text;
}

/** The body of a 2xx answer: JSON, or nothing. */
export function jsonOf(text: string, status: number, method: string, path: string): Json {
  if (!text) return null;
  try {
    return readJson(text);
  } catch {
    throw new UnexpectedResponse(`${method} ${path} answered HTTP ${status} with a body that is not JSON: ${excerpt(text)}`);
  }
}

export function isObject(body: Json): body is JsonObject {
  return typeof body === "object" && body !== null && !Array.isArray(body);
}

export function object(body: Json, what: string): JsonObject {
  if (!isObject(body)) throw new UnexpectedResponse(`${what} answered ${excerpt(body)}, not a JSON object`);
  return body;
}

export function integerField(body: Json, field: string, path: string): bigint {
  const value = isObject(body) ? body[field] : undefined;
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  throw new UnexpectedResponse(`POST ${path} answered without an integer '${field}': ${excerpt(body)}`);
}

/** The block a batch request was answered, checked. */
export function blockOf(body: Json, path: string, capacityRefusals: number): Block {
  const start = integerField(body, "start", path);
  const end = integerField(body, "end", path);
  // A service from before regions existed sends no step: its blocks are consecutive.
  const step = isObject(body) && "step" in body ? integerField(body, "step", path) : 1n;
  if (end < start) throw new UnexpectedResponse(`POST ${path} answered the empty block [${start}, ${end}]`);
  if (step < 1n || (end - start) % step !== 0n) {
    throw new UnexpectedResponse(`POST ${path} answered a block [${start}, ${end}] that step ${step} does not fit`);
  }
  return { start, end, step, capacityRefusals };
}

/** The service's error code and message from an error answer's body (its own, or API Gateway's). */
export function errorOf(status: number, text: string): [string, string] {
  let body: Json = null;
  try {
    body = readJson(text);
  } catch {
    body = null;
  }
  if (isObject(body) && isObject(body["error"] ?? null)) {
    const error = body["error"] as JsonObject;
    return [textOf(error["code"], "error"), textOf(error["message"], "")];
  }
  // API Gateway's own errors (auth, throttling, unknown route) look like {"message": "..."}
  const message = isObject(body) ? body["message"] : undefined;
  return [`http_${status}`, textOf(message, "") || text.slice(0, 200)];
}

function textOf(value: Json | undefined, fallback: string): string {
  if (typeof value === "string") return value;
  return value === undefined || value === null ? fallback : (stringifyJson(value) ?? fallback);
}

/**
 * The service's counter name rule (NAME_PATTERN in the service's rules.py),
 * repeated here so that a name it refuses is refused before anything is
 * sent: "." and ".." above all, which URL handling would collapse into
 * another path (/counters/./batch is /counters/batch).
 */
const NAME_RE =
  /^(?:[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,126}|\.\.[A-Za-z0-9_.-]{1,126})$/;

/**
 * `name` if the service accepts it as a counter name: 1-128 characters of
 * A-Z a-z 0-9 _ . -, and not "." or "..". Else InvalidName.
 */
export function checkName(name: unknown): string {
  if (typeof name !== "string" || !NAME_RE.test(name)) {
    throw new InvalidName(
      "counter name must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-', " +
        `and not '.' or '..', not ${typeof name === "string" ? JSON.stringify(name) : String(name)}`,
    );
  }
  return name;
}

/** A counter name as a path segment, checked. */
export function pathName(name: string): string {
  return encodeURIComponent(checkName(name));
}
