// What is running: the package's version, the commit it was built from (when known) and when
// the process started. GET /api/v1/version (no authentication) and `teamlog --version`.
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';

/** Written into dist/ by scripts/build.mjs: the commit `git rev-parse HEAD` gave at build time. */
export const BUILD_INFO_FILE = 'build-info.json';

function readJson(url: URL): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(url, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

// package.json is two levels up from both src/ops/ and dist/ops/.
const packageVersion = String(readJson(new URL('../../package.json', import.meta.url))?.version ?? '0.0.0');
/** Present only in a build (dist/build-info.json); running from source, TEAMLOG_COMMIT alone tells. */
const builtCommit = readJson(new URL(`../${BUILD_INFO_FILE}`, import.meta.url))?.commit;

export interface VersionInfo {
  version: string;
  commit?: string;
  started_at: string;
}

/** `configured` is TEAMLOG_COMMIT (config.commit), which wins over what the build recorded. */
export function versionInfo(configured: string | undefined): VersionInfo {
  const commit = configured ?? (typeof builtCommit === 'string' && /^[0-9a-f]{7,64}$/.test(builtCommit) ? builtCommit : undefined);
  // performance.timeOrigin is when this process started, not when this module was loaded.
  return { version: packageVersion, ...(commit ? { commit } : {}), started_at: new Date(performance.timeOrigin).toISOString() };
}

export const VersionSchema = Type.Object(
  {
    version: Type.String({ maxLength: 64, pattern: '^\\d+\\.\\d+\\.\\d+(?:[-+][0-9A-Za-z.+-]+)?$', description: 'The release (package.json "version", semver)', examples: ['0.1.0'] }),
    commit: Type.Optional(
      Type.String({
        minLength: 7,
        maxLength: 64,
        pattern: '^[0-9a-f]{7,64}$',
        description: 'The commit it was built from: TEAMLOG_COMMIT, else the one recorded by the build; absent when neither says',
        examples: ['1c49ad4f0b5e2d7a9c3e8f6a1b2c3d4e5f6a7b8c'],
      }),
    ),
    started_at: Type.String({ format: 'date-time', maxLength: 30, description: 'When this process started (ISO 8601 UTC)', examples: ['2026-11-21T09:30:00.123Z'] }),
  },
  {
    additionalProperties: false,
    description: 'What this instance runs',
    examples: [{ version: '0.1.0', commit: '1c49ad4f0b5e2d7a9c3e8f6a1b2c3d4e5f6a7b8c', started_at: '2026-11-21T09:30:00.123Z' }],
  },
);

export type Version = Static<typeof VersionSchema>;

/** GET /version, registered inside the /api/v1 scope; public, like the health probes. */
export function registerVersion(api: FastifyInstance, info: VersionInfo): void {
  api.get(
    '/version',
    {
      config: { public: true },
      schema: {
        operationId: 'getVersion',
        tags: ['operations'],
        summary: 'The version of the running service',
        description: 'No authentication. `commit` is present when the deployment sets TEAMLOG_COMMIT or the build recorded one.',
        response: { 200: VersionSchema },
      },
    },
    async () => info,
  );
}
