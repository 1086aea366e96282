// The hash of the UI's sources, written into the build as `source.sha256`, so a test can tell whether what
// ships in server/ui/static was built from the sources next to it (tests/server/ui/test_build.py computes
// the same hash: SHA-256 over each file's path relative to this folder, a NUL, its bytes and a NUL, in
// path order).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';

export const SOURCES = ['index.html', 'package.json', 'package-lock.json', 'vite.config.js', 'source-hash.js', 'public', 'src'];

function files(root, entry) {
  const path = join(root, entry);
  if (statSync(path).isDirectory()) return readdirSync(path).flatMap(name => files(root, join(entry, name)));
  return [entry];
}

export function sourceHash(root) {
  const hash = createHash('sha256');
  const all = SOURCES.flatMap(entry => files(root, entry)).map(p => p.split(sep).join('/')).sort();
  for (const path of all) {
    hash.update(path);
    hash.update('\0');
    hash.update(readFileSync(join(root, path)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

/** A Vite plugin writing the hash into the build. */
export function sourceHashPlugin(root) {
  return {
    name: 'canvas2graph-source-hash',
    generateBundle() {
      this.emitFile({ type: 'asset', fileName: 'source.sha256', source: `${sourceHash(root)}\n` });
    },
  };
}

