// npm run size -w @teamlog/client: the browser bundle's size, minified and gzipped (esbuild),
// of the whole client without socket.io-client (the REST part and the real-time wrapper), and
// with it. README.md states the first; test/client-package.test.ts holds it under 10 KB.
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const ENTRY = new URL('../src/index.ts', import.meta.url).pathname;

/** Bytes of the minified browser bundle, and gzipped; socket.io-client left out unless `withSocketIo`. */
export async function bundleSize({ withSocketIo = false } = {}): Promise<{ minified: number; gzipped: number }> {
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    external: withSocketIo ? [] : ['socket.io-client'],
    logLevel: 'silent',
  });
  const bytes = result.outputFiles[0]!.contents;
  return { minified: bytes.length, gzipped: gzipSync(bytes, { level: 9 }).length };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
  const rest = await bundleSize();
  const all = await bundleSize({ withSocketIo: true });
  console.log(`without socket.io-client: ${kb(rest.minified)} minified, ${kb(rest.gzipped)} gzipped`);
  console.log(`with socket.io-client:    ${kb(all.minified)} minified, ${kb(all.gzipped)} gzipped`);
}
