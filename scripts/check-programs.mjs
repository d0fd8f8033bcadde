#!/usr/bin/env node
// Checks that every program the project runs comes from a Debian package scripts/setup.sh
// installs. A machine that kept what earlier sessions installed by hand builds fine while a
// fresh one cannot; this makes that fault fail here, with the package named, on any machine.
//
// 1. Finds the programs the build files and scripts invoke (cmake toolchains and presets, shell
//    scripts' command words, spawn/execFile calls in scripts/, tests/ and bench/).
// 2. Requires each one to be listed in scripts/programs.txt with the package that owns it.
// 3. Resolves each listed program on this machine (PATH, Debian's PostgreSQL 15 bin) and asks
//    dpkg which package owns it, following symlinks and alternatives.
// 4. Fails unless that package is in setup.sh's `packages=(…)` list or is Essential in Debian.
//
// Usage: node scripts/check-programs.mjs [--root DIR]   (exit 1 with one line per problem)
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const argRoot = process.argv.indexOf('--root');
const root = argRoot > 0 ? path.resolve(process.argv[argRoot + 1]) : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const EXTRA_DIRS = ['/usr/lib/postgresql/15/bin'];

/** programs.txt: `program package note…`, `#` comments. */
export function readManifest(text) {
  const map = new Map();
  for (const line of text.split('\n')) {
    const t = line.replace(/#.*/, '').trim();
    if (!t) continue;
    const [program, pkg] = t.split(/\s+/);
    map.set(program, pkg);
  }
  return map;
}

/** The words of setup.sh's `packages=( … )` array. */
export function readSetupPackages(text) {
  const m = /(?:^|\n)packages=\(([\s\S]*?)\n\)/.exec(text);
  if (!m) throw new Error('scripts/setup.sh has no packages=( … ) list');
  return new Set(m[1].replace(/#.*/g, '').split(/\s+/).filter(Boolean));
}

// Words in command position that are shell syntax, builtins or functions, not programs.
const SHELL_WORDS = new Set(`if then else elif fi for in do done while until case esac function return exit set shift
  local export readonly declare unset trap cd echo printf read true false test [ [[ ] ]] : . source exec eval
  command type shopt wait kill break continue printf mapfile let pushd popd umask ulimit`.split(/\s+/));

/**
 * Shell text with heredoc bodies, comments and quoted strings removed; a `$( … )` inside
 * double quotes is kept (as its own line), since it runs a program.
 */
function shellCode(text) {
  let out = '';
  let heredoc = null;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (heredoc) {
      if (line.trim() === heredoc) heredoc = null;
      continue;
    }
    const h = /<<-?\s*['"]?(\w+)['"]?/.exec(line);
    if (h) heredoc = h[1];
    out += line + '\n';
  }
  let code = '';
  for (let i = 0; i < out.length; i++) {
    const c = out[i];
    if (c === '#' && (i === 0 || /\s/.test(out[i - 1]))) {
      while (i < out.length && out[i] !== '\n') i++;
      code += '\n';
    } else if (c === "'") {
      i = out.indexOf("'", i + 1);
      if (i < 0) break;
      code += "''";
    } else if (c === '"') {
      let j = i + 1;
      let inner = '';
      for (; j < out.length && out[j] !== '"'; j++) {
        if (out[j] === '\\') j++;
        else if (out.startsWith('$(', j)) {
          let depth = 0;
          let k = j;
          for (; k < out.length; k++) {
            if (out[k] === '(') depth++;
            else if (out[k] === ')' && --depth === 0) break;
          }
          inner += '\n' + shellCode(out.slice(j + 2, k)) + '\n';
          j = k;
        }
      }
      code += '""' + inner;
      i = j;
    } else code += c;
  }
  return code;
}

/** Program names in command position in a shell script. */
export function shellCommands(text) {
  const found = new Set();
  const functions = new Set([...text.matchAll(/^\s*([A-Za-z_][\w-]*)\s*\(\)\s*\{/gm)].map((m) => m[1]));
  // Array literals (`packages=( … )`) hold words, not commands.
  const code = shellCode(text).replace(/\b\w+=\([^)]*\)/g, '');
  for (let line of code.split('\n')) {
    line = line.replace(/^\s*[^\s()]+\)(?!\))/, ''); // a case pattern
    // Split into simple commands at control operators and substitutions.
    for (const part of line.split(/\|\||&&|[;|&(){}`]|\$\(|\bthen\b|\bdo\b|\belse\b/)) {
      const words = part.trim().split(/\s+/).filter(Boolean);
      // Wrappers run the word after them (and their options): record them, look past them.
      while (words.length && (/^\w+=/.test(words[0]) || ['env', 'timeout', 'exec', 'sudo', 'if', 'while', 'until', '!'].includes(words[0]) || words[0].startsWith('""'))) {
        const w = words.shift();
        if (w === 'env' || w === 'timeout' || w === 'sudo') found.add(w);
        while (words.length && (words[0].startsWith('-') || /^\w+=/.test(words[0]) || /^\d+[smh]?$/.test(words[0]) || words[0] === '""')) words.shift();
      }
      const w = words[0];
      if (!w || SHELL_WORDS.has(w) || functions.has(w) || !/^[a-z][\w+-]*(\.[a-z]+)?$/.test(w)) continue;
      if (w === 'command' || w === 'type') continue;
      found.add(w);
    }
  }
  return found;
}

/** Programs named by cmake: compilers, archivers, find_program(NAME …). */
export function cmakePrograms(text) {
  const found = new Set();
  for (const m of text.matchAll(/set\(\s*CMAKE_(?:C|CXX)_COMPILER\s+([\w.+-]+)/g)) found.add(m[1]);
  for (const m of text.matchAll(/set\(\s*CMAKE_(?:AR|RANLIB|LINKER)\s+([\w.+-]+)/g)) found.add(m[1]);
  for (const m of text.matchAll(/find_program\(\s*\w+\s+(?:NAMES\s+)?([\w.+-]+)/g)) found.add(m[1]);
  for (const m of text.matchAll(/"CMAKE_(?:C|CXX)_COMPILER"\s*:\s*"([\w.+-]+)"/g)) found.add(m[1]);
  return found;
}

/** Programs a Node script spawns by name: spawn('x'), execFileSync('x'), …, and `path.join(BIN, 'x')`. */
export function spawnedPrograms(source) {
  const found = new Set();
  const text = source.replace(/^\s*(\/\/|\/?\*).*$/gm, '');
  for (const m of text.matchAll(/\b(?:spawn|spawnSync|execFile|execFileSync|execFileAsync|execSync|run)\(\s*['"]([\w.+-]+)['"]/g)) found.add(m[1]);
  for (const m of text.matchAll(/path\.join\(\s*[A-Z0-9_]+_BIN\s*,\s*['"]([\w.+-]+)['"]\)/g)) found.add(m[1]);
  for (const m of text.matchAll(/['"]sh['"],\s*\[\s*['"]-c['"],\s*['"]command -v ([^'"]+)['"]/g)) for (const w of m[1].split(/\s+/)) found.add(w);
  return found;
}

function walk(dir, pick, out = []) {
  if (!existsSync(dir)) return out;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'build' || entry.name.startsWith('.') && entry.name !== '.ci') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, pick, out);
    else if (pick(entry.name)) out.push(full);
  }
  return out;
}

/** Every program invoked, with the first file that invokes it. */
export function invokedPrograms(repo) {
  const where = new Map();
  const add = (names, file) => {
    for (const n of names) if (!where.has(n)) where.set(n, path.relative(repo, file));
  };
  const shells = [...walk(path.join(repo, 'scripts'), (n) => n.endsWith('.sh')), ...walk(path.join(repo, '.ci'), () => true)];
  for (const f of shells) add(shellCommands(readFileSync(f, 'utf8')), f);
  const cmake = [path.join(repo, 'CMakeLists.txt'), path.join(repo, 'CMakePresets.json'), ...walk(path.join(repo, 'cmake'), () => true),
    ...walk(path.join(repo, 'tests'), (n) => n === 'CMakeLists.txt')];
  for (const f of cmake) if (existsSync(f)) add(cmakePrograms(readFileSync(f, 'utf8')), f);
  const scripts = ['scripts', 'tests', 'bench'].flatMap((d) => walk(path.join(repo, d), (n) => /\.(m?js|ts)$/.test(n)));
  for (const f of scripts) add(spawnedPrograms(readFileSync(f, 'utf8')), f);
  return where;
}

function onPath(program) {
  for (const dir of [...(process.env.PATH ?? '').split(':'), ...EXTRA_DIRS]) {
    const p = path.join(dir, program);
    if (dir && existsSync(p)) return p;
  }
  return null;
}

/** The file and every symlink on the way to its target (alternatives included), each also without /usr (merged /usr). */
function linkChain(file) {
  const chain = [];
  let p = file;
  for (let i = 0; i < 16 && p; i++) {
    chain.push(p);
    if (p.startsWith('/usr/')) chain.push(p.slice(4));
    let st;
    try { st = lstatSync(p); } catch { break; }
    if (!st.isSymbolicLink()) break;
    p = path.resolve(path.dirname(p), readlinkSync(p));
  }
  return chain;
}

/** path → owning packages, for many paths in one dpkg-query call (it prints what it finds). */
function ownersOf(paths) {
  const owned = new Map();
  if (paths.length === 0) return owned;
  let out = '';
  try {
    out = execFileSync('dpkg-query', ['-S', ...paths], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch (error) {
    out = error.stdout ?? ''; // exit 1 when some path has no owner
  }
  for (const line of out.split('\n')) {
    const at = line.indexOf(': ');
    if (at < 0) continue;
    const file = line.slice(at + 2);
    const pkgs = line.slice(0, at).split(', ').map((p) => p.replace(/:.*$/, ''));
    owned.set(file, [...(owned.get(file) ?? []), ...pkgs]);
  }
  return owned;
}

/** The packages Debian marks Essential, among these. */
function essentialOf(pkgs) {
  let out = '';
  try {
    out = execFileSync('dpkg-query', ['-W', '-f=${Package} ${Essential}\n', ...pkgs], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch (error) {
    out = error.stdout ?? '';
  }
  return new Set(out.split('\n').filter((l) => l.endsWith(' yes')).map((l) => l.split(' ')[0]));
}

export function check(repo) {
  const problems = [];
  const manifest = readManifest(readFileSync(path.join(repo, 'scripts/programs.txt'), 'utf8'));
  const setup = readSetupPackages(readFileSync(path.join(repo, 'scripts/setup.sh'), 'utf8'));
  for (const [program, file] of invokedPrograms(repo)) {
    if (!manifest.has(program)) problems.push(`${program} (run by ${file}) is not in scripts/programs.txt: add it with the Debian package that owns it`);
  }
  const checked = [...manifest].filter(([, pkg]) => pkg !== 'optional');
  const found = new Map(checked.map(([program]) => [program, onPath(program)]));
  const chains = new Map(checked.map(([program]) => [program, found.get(program) ? linkChain(found.get(program)) : []]));
  const owned = ownersOf([...new Set([...chains.values()].flat())]);
  const essential = essentialOf([...new Set(checked.map(([, pkg]) => pkg).filter((pkg) => pkg !== 'node'))]);
  for (const [program, pkg] of checked) {
    const at = found.get(program);
    if (pkg === 'node') {
      if (!at) problems.push(`${program} not found: install Node.js 20`);
      continue;
    }
    const listed = setup.has(pkg) || essential.has(pkg);
    if (!listed) problems.push(`${program} comes from Debian package ${pkg}, which scripts/setup.sh does not install: add ${pkg} to its packages list`);
    if (!at) {
      problems.push(`${program} not found on this machine${listed ? ': run scripts/setup.sh' : ''}`);
      continue;
    }
    const own = new Set(chains.get(program).flatMap((p) => owned.get(p) ?? []));
    if (!own.has(pkg)) problems.push(`${program} (${at}) is owned by ${own.size ? [...own].join(', ') : 'no Debian package'}, not ${pkg} as scripts/programs.txt says`);
  }
  return { problems, programs: manifest.size };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { problems, programs } = check(root);
  if (problems.length) {
    console.error(`check-programs: ${problems.length} problem(s):`);
    for (const p of problems) console.error(`  - ${p}`);
    process.exit(1);
  }
  console.log(`check-programs: ${programs} programs, each from a package scripts/setup.sh installs (or Debian always has)`);
}
