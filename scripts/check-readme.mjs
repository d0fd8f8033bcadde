#!/usr/bin/env node
// Typechecks every ```ts block of README.md against the built `postbox` package, so the
// README cannot document an API that does not exist. Each block becomes a module of its own in
// a temporary folder inside the repository (so `postbox`, `pg`, `zod` resolve as a user's
// would); a block whose first line is a `// name.ts` comment is written under that name, so
// others can import it. scripts/readme/prelude.ts declares what the blocks take as given
// (`Env`, the app's `send`, a fragment's `env` and `client`). Errors are reported at their
// README line.
//
//   node scripts/check-readme.mjs [--readme path/to/README.md]   (build the package first)
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PRELUDE = path.join(root, 'scripts/readme/prelude.ts');

/** The ```ts blocks of a markdown text: `{ name, code, line }`, `line` being the README line of the block's first code line. */
export function extractBlocks(markdown) {
  const lines = markdown.split('\n');
  const blocks = [];
  const names = new Set();
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*(ts|typescript)\s*$/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence] = open;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !lines[end].trimStart().startsWith(fence)) end++;
    const code = lines.slice(start, end).map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l));
    const named = /^\/\/\s*([\w.-]+\.ts)\s*$/.exec(code[0] ?? '');
    let name = named && !names.has(named[1]) ? named[1] : `block-${blocks.length + 1}.ts`;
    names.add(name);
    blocks.push({ name, code: code.join('\n'), line: start + 1 });
    i = end;
  }
  return blocks;
}

/** Checks the blocks of `readmePath`; returns `{ ok, blocks, errors }` (errors mapped to README lines). */
export function checkReadme(readmePath) {
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  if (!existsSync(path.join(root, 'js-shim/dist/index.d.ts'))) {
    throw new Error('check-readme: js-shim/dist is missing; build the package first (npm run -w postbox build)');
  }
  const blocks = extractBlocks(readFileSync(readmePath, 'utf8'));
  const dir = mkdtempSync(path.join(root, '.check-readme-'));
  try {
    for (const b of blocks) writeFileSync(path.join(dir, b.name), `${b.code}\nexport {};\n`);
    copyFileSync(PRELUDE, path.join(dir, 'prelude.ts'));
    writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'ESNext',
          moduleResolution: 'Bundler',
          lib: ['ES2022'],
          types: ['@cloudflare/workers-types', 'node'],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          isolatedModules: true,
        },
        include: ['*.ts'],
      }),
    );
    const run = spawnSync(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], { encoding: 'utf8' });
    const out = `${run.stdout}${run.stderr}`;
    const byName = new Map(blocks.map((b) => [b.name, b]));
    const errors = [];
    for (const line of out.split('\n')) {
      const m = /^(?:.*[\\/])?([\w.-]+\.ts)\((\d+),(\d+)\): (error .*)$/.exec(line);
      if (m && byName.has(m[1])) {
        errors.push(`${path.relative(root, readmePath) || readmePath}:${byName.get(m[1]).line + Number(m[2]) - 1}:${m[3]} (${m[1]}): ${m[4]}`);
      } else if (line.trim()) {
        errors.push(line.replace(dir, '<readme blocks>'));
      }
    }
    if (run.status !== 0 && errors.length === 0) errors.push(`tsc exited ${run.status}`);
    return { ok: run.status === 0, blocks: blocks.length, errors };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--readme');
  const readme = path.resolve(at > 0 ? process.argv[at + 1] : path.join(root, 'README.md'));
  const result = checkReadme(readme);
  if (!result.ok) {
    for (const e of result.errors) console.error(e);
    console.error(`check-readme: ${path.relative(root, readme)}: ${result.errors.length} problem(s) in ${result.blocks} ts blocks`);
    process.exit(1);
  }
  console.log(`check-readme: ${result.blocks} ts blocks of ${path.relative(root, readme)} typecheck against the built package`);
}
