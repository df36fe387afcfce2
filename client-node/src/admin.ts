/**
 * The admin operations (/admin/counters): create, read, list, update and
 * delete counters. HttpBackend offers them as methods; each is one request
 * through the exchange, its answer checked.
 */

import { UnexpectedResponse } from "./errors.js";
import { type Json, type JsonObject, checkName, excerpt, object, pathName } from "./parse.js";

export interface RequestOptions {
  idempotencyKey?: string;
  retryUnknownOutcome?: boolean;
}

/** What the admin operations send through: HttpBackend.request. */
export type Requester = (method: string, path: string, body?: Json, options?: RequestOptions) => Promise<Json>;

export interface CreateOptions {
  start?: number | bigint;
  max?: number | bigint;
  /** The most IDs each service environment takes at a time for next (the service's default is 1). */
  cache?: number;
}

export async function createCounter(request: Requester, name: string, options: CreateOptions = {}): Promise<JsonObject> {
  const body: JsonObject = { name: checkName(name) };
  if (options.start !== undefined) body["start"] = options.start;
  if (options.max !== undefined) body["max"] = options.max;
  if (options.cache !== undefined) body["cache"] = options.cache;
  return object(await request("POST", "/admin/counters", body, { retryUnknownOutcome: false }), "create");
}

export async function getCounter(request: Requester, name: string): Promise<JsonObject> {
  return object(await request("GET", `/admin/counters/${pathName(name)}`), "get");
}

export interface ListOptions {
  limit?: number;
  cursor?: string;
  /** Deleted counters too, each with `deleted: true` and the mark it keeps. */
  deleted?: boolean;
}

export async function listCounters(
  request: Requester,
  options: ListOptions = {},
): Promise<JsonObject> {
  const query = new URLSearchParams();
  if (options.limit !== undefined) query.set("limit", String(options.limit));
  if (options.cursor !== undefined) query.set("cursor", options.cursor);
  if (options.deleted === true) query.set("deleted", "true");
  const path = "/admin/counters" + (query.size ? `?${query.toString()}` : "");
  const page = object(await request("GET", path), "list");
  const cursor = page["cursor"];
  if (!Array.isArray(page["counters"]) || !(cursor === undefined || cursor === null || typeof cursor === "string")) {
    throw new UnexpectedResponse(`list answered without a counters list and a cursor: ${excerpt(page)}`);
  }
  return page;
}

export interface UpdateChanges {
  next?: number | bigint;
  cache?: number;
  /** With next alone: a deleted counter's kept mark is raised too (it stays deleted). */
  deleted?: boolean;
}

/** PUT (see HttpBackend.update). */
export async function updateCounter(
  request: Requester,
  name: string,
  changes: UpdateChanges,
): Promise<JsonObject> {
  const body: JsonObject = {};
  if (changes.next !== undefined) body["next"] = changes.next;
  if (changes.cache !== undefined) body["cache"] = changes.cache;
  if (Object.keys(body).length === 0) throw new RangeError("update needs next, cache or both");
  if (changes.deleted === true) body["deleted"] = true;
  // Raise-only or setting a value, so repeating it is harmless.
  return object(await request("PUT", `/admin/counters/${pathName(name)}`, body), "update");
}

export async function deleteCounter(request: Requester, name: string): Promise<void> {
  await request("DELETE", `/admin/counters/${pathName(name)}`, undefined, { retryUnknownOutcome: false });
}
