/**
 * Who the client is: the headers that authenticate one request. No auth (the
 * dev server), an API key, or SigV4 with the AWS SDK's own signer and
 * credential chain.
 */

import { checkRegion } from "./config.js";
import { ConfigurationError, MissingCredentials, MissingRegion } from "./errors.js";

/**
 * Headers that authenticate one request. An Auth may also have
 * `prepare(endpoint)`, which HttpBackend calls once, to refuse at
 * construction what would make every request fail.
 */
export interface Auth {
  headers(method: string, url: string, body: string | undefined): Promise<Record<string, string>> | Record<string, string>;
  prepare?(endpoint: string): void;
}

export class NoAuth implements Auth {
  headers(): Record<string, string> {
    return {};
  }
}

/** ClientAuth API_KEY: the key in x-api-key. */
export class ApiKeyAuth implements Auth {
  readonly #key: string;

  constructor(apiKey: string) {
    if (!apiKey) throw new RangeError("apiKey is empty");
    this.#key = apiKey;
  }

  headers(): Record<string, string> {
    return { "x-api-key": this.#key };
  }
}

export const NO_CREDENTIALS =
  "no AWS credentials for SigV4: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
  "(and AWS_SESSION_TOKEN for temporary ones), or AWS_PROFILE to a profile in " +
  "~/.aws/config or ~/.aws/credentials, or run where an IAM role provides them (Lambda, ECS, EC2)";
export const NO_REGION =
  "no AWS region for SigV4: the endpoint is not an execute-api URL that names one; " +
  "pass region, or set AWS_REGION or AWS_DEFAULT_REGION";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

export interface IamAuthOptions {
  region?: string;
  /** Where credentials come from; by default the AWS SDK's chain (fromNodeProviderChain). */
  credentials?: () => Promise<AwsCredentials>;
  /** The signing time, for tests; the clock by default. */
  signingDate?: () => Date;
}

/**
 * ClientAuth AWS_IAM (and the admin routes): SigV4 for execute-api with the
 * AWS SDK's own signer, and credentials from the SDK's usual chain
 * (environment, SSO, profile, web identity, container and instance roles),
 * which keeps what it found and renews expiring credentials itself.
 *
 * The SDK is loaded on the first signed request, so a caller with an API key
 * or no auth never loads it. No credentials anywhere is MissingCredentials,
 * raised by that first request (and told to every caller waiting for its
 * block); no region for the endpoint is MissingRegion, and a region or a
 * credential source that cannot be one is ConfigurationError, both raised
 * when IamAuth or HttpBackend is built.
 */
export class IamAuth implements Auth {
  readonly #region: string | undefined;
  readonly #signingDate: (() => Date) | undefined;
  #credentials: (() => Promise<AwsCredentials>) | undefined;
  #signer: Promise<typeof import("@smithy/signature-v4")> | undefined;
  #sha256: Promise<typeof import("@aws-crypto/sha256-js")> | undefined;

  constructor(options: IamAuthOptions = {}) {
    if (options.region !== undefined) checkRegion(options.region, "region");
    for (const name of ["credentials", "signingDate"] as const) {
      if (options[name] !== undefined && typeof options[name] !== "function") {
        throw new ConfigurationError(`${name} must be a function, not ${typeof options[name]}`);
      }
    }
    this.#region = options.region;
    this.#credentials = options.credentials;
    this.#signingDate = options.signingDate;
  }

  regionFor(url: string): string {
    if (this.#region) return this.#region;
    const named = regionOf(url);
    if (named) return named;
    // Lambda and most AWS tools set AWS_REGION; the CLI's profiles, AWS_DEFAULT_REGION.
    for (const variable of ["AWS_REGION", "AWS_DEFAULT_REGION"]) {
      const region = process.env[variable];
      if (region) return checkRegion(region, variable);
    }
    throw new MissingRegion(NO_REGION);
  }

  prepare(endpoint: string): void {
    this.regionFor(endpoint);
  }

  async #credentialsNow(): Promise<AwsCredentials> {
    if (this.#credentials === undefined) {
      const { fromNodeProviderChain } = await import("@aws-sdk/credential-providers");
      // Built once: the chain caches what it found and refreshes it before it expires.
      this.#credentials ??= fromNodeProviderChain();
    }
    try {
      return await this.#credentials();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new MissingCredentials(`${reason}; ${NO_CREDENTIALS}`);
    }
  }

  async headers(method: string, url: string, body: string | undefined): Promise<Record<string, string>> {
    this.#signer ??= import("@smithy/signature-v4");
    this.#sha256 ??= import("@aws-crypto/sha256-js");
    const [{ SignatureV4 }, { Sha256 }, credentials] = await Promise.all([
      this.#signer,
      this.#sha256,
      this.#credentialsNow(),
    ]);
    const target = new URL(url);
    const signer = new SignatureV4({
      service: "execute-api",
      region: this.regionFor(url),
      credentials,
      sha256: Sha256,
    });
    const query: Record<string, string> = {};
    target.searchParams.forEach((value, key) => {
      query[key] = value;
    });
    const headers: Record<string, string> = { host: target.host };
    if (body !== undefined) headers["content-type"] = "application/json";
    const signed = await signer.sign(
      {
        method,
        protocol: target.protocol,
        hostname: target.hostname,
        ...(target.port ? { port: Number(target.port) } : {}),
        path: target.pathname,
        query,
        headers,
        ...(body !== undefined ? { body } : {}),
      },
      this.#signingDate ? { signingDate: this.#signingDate() } : {},
    );
    // fetch sets Host itself, from the same URL.
    const { host: _host, ...rest } = signed.headers;
    return rest;
  }
}

// An API's own host name, which names its region: <api-id>.execute-api.<region>.amazonaws.com,
// and a private API's through one of its VPC endpoints, <api-id>-<vpce-id>.execute-api...
// (API Gateway developer guide, "Invoke a private API"); .amazonaws.com.cn in China.
const EXECUTE_API_HOST = /^[a-z0-9]+(?:-vpce-[0-9a-f]+)?\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$/;

function regionOf(url: string): string | undefined {
  return EXECUTE_API_HOST.exec(new URL(url).hostname)?.[1];
}
