import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const index = fileURLToPath(new URL("../../src/index.js", import.meta.url));
const hooks = fileURLToPath(new URL("../loaded-modules.js", import.meta.url));

/** Runs `body` (an ES module that imports the package as `idblocks`) in a fresh node; what it printed, and the packages it loaded. */
async function inChild(body: string, env: Record<string, string> = {}): Promise<{ out: string; loaded: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "idblocks-node-"));
  const script = join(dir, "script.mjs");
  const log = join(dir, "loaded.txt");
  writeFileSync(log, "");
  writeFileSync(script, `import * as idblocks from ${JSON.stringify(index)};\n${body}\n`);
  const { stdout } = await run(process.execPath, ["--import", hooks, script], {
    env: { PATH: process.env["PATH"] ?? "", HOME: dir, IDBLOCKS_LOADED_LOG: log, IDBLOCKS_REGISTER_HOOKS: "1", ...env },
    timeout: 60_000,
  });
  return { out: stdout.trim(), loaded: readFileSync(log, "utf8").split("\n").filter(Boolean) };
}

test("a caller with an API key never loads the AWS SDK", async () => {
  const { out, loaded } = await inChild(`
    const auth = new idblocks.ApiKeyAuth("key");
    const backend = new idblocks.HttpBackend("https://ids.example.com/v1", { auth });
    console.log(JSON.stringify(await auth.headers("POST", backend.endpoint + "/counters/a/batch", "{}")));
  `);
  assert.equal(out, '{"x-api-key":"key"}');
  assert.ok(loaded.includes("lossless-json"), `the hooks saw ${loaded.join(", ")}`);
  assert.deepEqual(loaded.filter((name) => /^@(aws-sdk|smithy|aws-crypto)\//.test(name)), []);
});

test("IamAuth takes credentials from the SDK's chain (here the environment) and loads the SDK only then", async () => {
  const { out, loaded } = await inChild(
    `
    const auth = new idblocks.IamAuth();
    const headers = await auth.headers("POST", "https://abc.execute-api.eu-west-1.amazonaws.com/v1/counters/a/batch", "{}");
    console.log(headers.authorization.split(",")[0]);
  `,
    { AWS_ACCESS_KEY_ID: "AKIDCHAIN", AWS_SECRET_ACCESS_KEY: "secret", AWS_EC2_METADATA_DISABLED: "true" },
  );
  assert.match(out, /^AWS4-HMAC-SHA256 Credential=AKIDCHAIN\/\d{8}\/eu-west-1\/execute-api\/aws4_request$/);
  assert.ok(loaded.includes("@aws-sdk/credential-providers"));
});

test("IamAuth with no credentials anywhere in the chain is MissingCredentials, saying where they may come from", async () => {
  const { out } = await inChild(
    `
    const auth = new idblocks.IamAuth({ region: "eu-west-1" });
    try {
      await auth.headers("POST", "https://ids.example.com/v1/counters/a/batch", "{}");
      console.log("signed");
    } catch (error) {
      console.log(error.name + " " + error.code + " " + error.message.includes("AWS_ACCESS_KEY_ID"));
    }
  `,
    {
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_CONFIG_FILE: "/nonexistent/config",
      AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/credentials",
    },
  );
  assert.equal(out, "MissingCredentials missing_credentials true");
});
