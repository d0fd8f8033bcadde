// The command line's entry, which js-shim/bin/postbox.js (the `postbox` bin) loads once built.
import { run } from './program.js';

// `postbox list | head` closes the pipe early: that ends the output, it is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

process.exitCode = await run(process.argv.slice(2));
