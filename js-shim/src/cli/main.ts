// The command line's entry, which js-shim/bin/postbox.js (the `postbox` bin) loads once built.
import { run } from './program.js';

process.exitCode = await run(process.argv.slice(2));
