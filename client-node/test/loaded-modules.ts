/**
 * Module hooks that write every package a process loads to the file named by
 * IDBLOCKS_LOADED_LOG, one a line: the test of what a caller pays for.
 */

import { appendFileSync } from "node:fs";
import { register } from "node:module";

interface ResolveContext {
  parentURL?: string;
}
type NextResolve = (specifier: string, context: ResolveContext) => Promise<{ url: string }>;

export async function resolve(specifier: string, context: ResolveContext, next: NextResolve): Promise<{ url: string }> {
  const log = process.env["IDBLOCKS_LOADED_LOG"];
  if (log && !specifier.startsWith(".") && !specifier.startsWith("node:") && !specifier.startsWith("file:")) {
    appendFileSync(log, `${specifier}\n`);
  }
  return next(specifier, context);
}

// Imported with --import: registers this same file as the hooks.
if (process.env["IDBLOCKS_REGISTER_HOOKS"] === "1") {
  register(import.meta.url);
}
