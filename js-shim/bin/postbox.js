#!/usr/bin/env node
// The `postbox` command (package.json "bin"). A committed launcher rather than the built file:
// npm links a workspace's bins when it installs, before anything is built, and skips a bin
// whose file does not exist yet.
import { existsSync } from 'node:fs';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('postbox: the command line is not built yet: run `npm run build` (or `npm run -w postbox build`) first\n');
  process.exit(4);
}
await import(main.href);
