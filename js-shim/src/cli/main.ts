#!/usr/bin/env node
// The `postbox` bin (package.json "bin"): `npx postbox --help`.
import { run } from './program.js';

process.exitCode = await run(process.argv.slice(2));
