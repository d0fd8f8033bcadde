#!/usr/bin/env node
// Generates js-shim/src/generated/migrations.ts from migrations/NNNN_name.sql.
//
// migrations/ is the one source of truth for the schema; the shim embeds it (Workers have no
// file system) as OUTBOX_MIGRATIONS: version, name, the whole file, and its statements split on
// top-level semicolons (not those inside comments, quoted strings, quoted identifiers or
// dollar-quoted bodies), so a driver can send one statement per query.
//
// Usage: node scripts/gen-sql.mjs [--check]
//   --check  exit 1 if the generated file is missing or stale, write nothing.
// The output is rewritten only when its content changes.

import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MIGRATIONS_DIR = path.join(root, 'migrations');
const OUT_FILE = path.join(root, 'js-shim', 'src', 'generated', 'migrations.ts');
const FILE_RE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/**
 * The lexical pieces of SQL text, in order: `comment` (-- line, nested block), `string`
 * ('...' with '' escapes, E'...' with backslash escapes), `quoted` ("..." identifiers),
 * `dollar` ($tag$...$tag$ bodies), `word` (an identifier or keyword), `semicolon`, `space` and
 * `other` (one character). Throws on an unterminated comment, string, identifier or body.
 * @param {string} sql
 * @returns {Generator<{ type: string, start: number, end: number }>}
 */
function* lex(sql) {
  const n = sql.length;
  let i = 0;
  // Whether the character before `at` could continue an identifier (a$b names, $1 params).
  const joins = (at) => /[A-Za-z0-9_$]/.test(sql[at] ?? '');
  while (i < n) {
    const start = i;
    const c = sql[i];
    const next = sql[i + 1];
    let type = 'other';
    if (c === '-' && next === '-') {
      const eol = sql.indexOf('\n', i);
      i = eol === -1 ? n : eol + 1;
      type = 'comment';
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') (depth++, (i += 2));
        else if (sql[i] === '*' && sql[i + 1] === '/') (depth--, (i += 2));
        else i++;
      }
      if (depth > 0) throw new Error('unterminated block comment');
      type = 'comment';
    } else if (c === "'") {
      // E'...' (escape string) when the quote follows an E/e that starts a token.
      const escape = (sql[i - 1] === 'E' || sql[i - 1] === 'e') && !joins(i - 2);
      i = skipQuoted(sql, i, "'", escape);
      type = 'string';
    } else if (c === '"') {
      i = skipQuoted(sql, i, '"', false);
      type = 'quoted';
    } else if (c === '$' && !joins(i - 1) && /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.test(sql.slice(i))) {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i))[0];
      const close = sql.indexOf(tag, i + tag.length);
      if (close === -1) throw new Error(`unterminated dollar quote ${tag}`);
      i = close + tag.length;
      type = 'dollar';
    } else if (/[A-Za-z_]/.test(c) && !joins(i - 1)) {
      i += /^[A-Za-z_][A-Za-z0-9_$]*/.exec(sql.slice(i))[0].length;
      type = 'word';
    } else {
      i++;
      type = c === ';' ? 'semicolon' : /\s/.test(c) ? 'space' : 'other';
    }
    yield { type, start, end: i };
  }
}

/**
 * Splits SQL text into statements on top-level semicolons (not those inside comments, strings,
 * quoted identifiers or dollar-quoted bodies). Returns trimmed statements without the
 * terminating semicolon; pieces that hold only comments and whitespace are dropped.
 * @param {string} sql
 * @returns {string[]}
 */
export function splitStatements(sql) {
  const out = [];
  let start = 0;
  let meaningful = false; // the current piece has something other than comments/whitespace
  const push = (end) => {
    const text = sql.slice(start, end).trim();
    if (meaningful && text) out.push(text);
    meaningful = false;
  };
  for (const token of lex(sql)) {
    if (token.type === 'semicolon') {
      push(token.start);
      start = token.end;
    } else if (token.type !== 'comment' && token.type !== 'space') {
      meaningful = true;
    }
  }
  push(sql.length);
  return out;
}

function skipQuoted(sql, i, quote, backslashEscapes) {
  let j = i + 1;
  while (j < sql.length) {
    const ch = sql[j];
    if (backslashEscapes && ch === '\\') {
      j += 2;
      continue;
    }
    if (ch === quote) {
      if (sql[j + 1] === quote) {
        j += 2;
        continue;
      }
      return j + 1;
    }
    j++;
  }
  throw new Error(`unterminated ${quote === "'" ? 'string' : 'quoted identifier'}`);
}

/** The schema every migration names, written bare (`outbox.job`, `CREATE SCHEMA … outbox`). */
const SCHEMA = 'outbox';

/**
 * Splits one statement at each place it names the schema, so a named outbox's statements are
 * the same pieces joined by its own (quoted) schema, with no text search at run time. Only
 * the bare identifier `outbox` counts, outside comments, strings, quoted identifiers and
 * dollar-quoted bodies; it must qualify a name (`outbox.job`) or be the schema created. The
 * schema inside a string or a body (a function's text) cannot be substituted safely, so it is
 * refused, as is a quoted `"outbox"`.
 * @param {string} sql one statement from splitStatements
 * @returns {string[]} the pieces; `pieces.join('outbox')` is the statement
 */
export function schemaFragments(sql) {
  const pieces = [];
  let start = 0;
  const refuse = (what) => {
    throw new Error(`the schema appears inside ${what}, where it cannot be replaced for a named outbox: ${sql.slice(0, 60)}`);
  };
  const mentions = (text) => /(^|[^A-Za-z0-9_$])outbox\s*\./i.test(text);
  for (const { type, start: at, end } of lex(sql)) {
    const text = sql.slice(at, end);
    if (type === 'string' && mentions(text)) refuse('a string');
    if (type === 'dollar' && mentions(text)) refuse('a dollar-quoted body');
    if (type === 'quoted' && text.slice(1, -1).toLowerCase() === SCHEMA) refuse('a quoted identifier');
    if (type !== 'word' || text.toLowerCase() !== SCHEMA) continue;
    if (text !== SCHEMA) throw new Error(`write the schema as lowercase \`outbox\`: ${sql.slice(0, 60)}`);
    const qualifies = /^\s*\./.test(sql.slice(end));
    const created = /CREATE\s+SCHEMA\s+(IF\s+NOT\s+EXISTS\s+)?$/i.test(sql.slice(0, at));
    if (!qualifies && !created) throw new Error(`\`outbox\` must qualify a name (outbox.job) or be the schema created: ${sql.slice(0, 60)}`);
    pieces.push(sql.slice(start, at));
    start = end;
  }
  pieces.push(sql.slice(start));
  return pieces;
}

const LEADING_COMMENTS = /^(--[^\n]*\n|\s)+/;
const IDENT = '([a-z_][a-z0-9_]*)';

/**
 * What one statement does to the schema's functions and triggers: drizzle-kit generates tables,
 * columns, indexes and checks from the drizzle tables, but not these, so drizzle-kit users add
 * them from the statements this picks (OUTBOX_DRIZZLE_EXTRAS) and verifyOutboxSchema checks the
 * objects they leave. `null` for a statement about neither; throws for one it cannot follow
 * (teach it, rather than let the extras or the drift check silently miss an object).
 * @param {string} statement one statement from splitStatements
 * @returns {null | { action: 'create' | 'drop', object: 'function', name: string } | { action: 'create' | 'drop', object: 'trigger', name: string, table: string }}
 */
export function routineChange(statement) {
  const s = statement.replace(LEADING_COMMENTS, '');
  let m = new RegExp(`^CREATE\\s+(?:OR\\s+REPLACE\\s+)?FUNCTION\\s+outbox\\.${IDENT}\\s*\\(`, 'i').exec(s);
  if (m) return { action: 'create', object: 'function', name: m[1] };
  m = new RegExp(`^CREATE\\s+(?:OR\\s+REPLACE\\s+)?TRIGGER\\s+${IDENT}\\s[\\s\\S]*?\\bON\\s+outbox\\.${IDENT}\\b`, 'i').exec(s);
  if (m) return { action: 'create', object: 'trigger', name: m[1], table: m[2] };
  m = new RegExp(`^DROP\\s+FUNCTION\\s+(?:IF\\s+EXISTS\\s+)?outbox\\.${IDENT}\\b`, 'i').exec(s);
  if (m) return { action: 'drop', object: 'function', name: m[1] };
  m = new RegExp(`^DROP\\s+TRIGGER\\s+(?:IF\\s+EXISTS\\s+)?${IDENT}\\s+ON\\s+outbox\\.${IDENT}\\b`, 'i').exec(s);
  if (m) return { action: 'drop', object: 'trigger', name: m[1], table: m[2] };
  if (/^(CREATE|ALTER|DROP|COMMENT\s+ON)\s+(OR\s+REPLACE\s+)?(CONSTRAINT\s+|EVENT\s+)?(FUNCTION|PROCEDURE|TRIGGER|RULE)\b/i.test(s) ||
      /\b(ENABLE|DISABLE)\s+TRIGGER\b/i.test(s)) {
    throw new Error(`scripts/gen-sql.mjs cannot follow this statement for drizzle-kit users and the drift check; teach routineChange: ${s.slice(0, 60)}`);
  }
  return null;
}

/**
 * The statements drizzle-kit cannot generate, as [migration index, statement index] pairs in
 * order, and the functions and triggers the migrations leave behind.
 * @param {{ statements: string[] }[]} migrations
 */
export function routines(migrations) {
  const statements = [];
  const functions = new Map();
  const triggers = new Map();
  // Where each function's definition sits in `statements`: a later CREATE OR REPLACE takes the
  // first one's place, so the extras define each function once, as the migrations leave it, and
  // before the triggers that name it.
  const defined = new Map();
  migrations.forEach((m, i) =>
    m.statements.forEach((statement, j) => {
      const change = routineChange(statement);
      if (!change) return;
      if (change.object === 'function' && change.action === 'create' && defined.has(change.name)) {
        statements[defined.get(change.name)] = [i, j];
        return;
      }
      if (change.object === 'function') {
        if (change.action === 'create') defined.set(change.name, statements.length);
        else defined.delete(change.name);
      }
      statements.push([i, j]);
      const set = change.object === 'function' ? functions : triggers;
      const key = change.object === 'function' ? change.name : `${change.table}.${change.name}`;
      if (change.action === 'drop') set.delete(key);
      else set.set(key, change.object === 'function' ? change.name : { name: change.name, table: change.table });
    }),
  );
  return { statements, functions: [...functions.values()], triggers: [...triggers.values()] };
}

/** Reads and validates migrations/. */
export async function readMigrations(dir = MIGRATIONS_DIR) {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations = [];
  for (const file of files) {
    const m = FILE_RE.exec(file);
    if (!m) throw new Error(`migrations/${file}: name must be NNNN_lower_snake.sql`);
    const version = Number.parseInt(m[1], 10);
    // Ascending and unique; a gap is allowed, since parallel branches reserve numbers ahead
    // (migrate() records each version on its own, so a version filled in later still applies).
    const previous = migrations.at(-1)?.version ?? 0;
    if (version <= previous) throw new Error(`migrations/${file}: version ${version} must be above ${previous} (unique, ascending, from 1)`);
    const sql = (await readFile(path.join(dir, file), 'utf8')).replace(/\r\n/g, '\n');
    let statements;
    try {
      statements = splitStatements(sql);
    } catch (err) {
      throw new Error(`migrations/${file}: ${err.message}`);
    }
    if (statements.length === 0) throw new Error(`migrations/${file}: no statements`);
    for (const s of statements) {
      if (/^(BEGIN|COMMIT|ROLLBACK|START\s+TRANSACTION|END)\b/i.test(s.replace(/^(--[^\n]*\n|\s)+/, ''))) {
        throw new Error(`migrations/${file}: no transaction control inside a migration (migrate() wraps each one in its own transaction): ${s.slice(0, 60)}`);
      }
    }
    let fragments;
    try {
      fragments = statements.map(schemaFragments);
    } catch (err) {
      throw new Error(`migrations/${file}: ${err.message}`);
    }
    migrations.push({ version, name: m[2], sql, statements, fragments });
  }
  return migrations;
}

export function render(migrations) {
  const body = migrations
    .map((m) =>
      [
        '  {',
        `    version: ${m.version},`,
        `    name: ${JSON.stringify(m.name)},`,
        `    sql: ${JSON.stringify(m.sql)},`,
        '    statements: [',
        ...m.statements.map((s) => `      ${JSON.stringify(s)},`),
        '    ],',
        '  },',
      ].join('\n'),
    )
    .join('\n');
  const fragments = migrations
    .map((m) => ['  [', ...m.fragments.map((f) => `    ${JSON.stringify(f)},`), '  ],'].join('\n'))
    .join('\n');
  const extra = routines(migrations);
  return `// GENERATED by scripts/gen-sql.mjs from migrations/*.sql. Do not edit; do not commit.

/** One numbered migration from \`migrations/NNNN_name.sql\`. */
export interface OutboxMigration {
  /** NNNN from the file name: unique and ascending, from 1. */
  readonly version: number;
  /** The file name's \`name\` part, e.g. \`outbox_tables\`. */
  readonly name: string;
  /** The whole file. */
  readonly sql: string;
  /** The file split on top-level semicolons, in order, without the semicolons. */
  readonly statements: readonly string[];
}

/** Every migration, ordered by version. */
export const OUTBOX_MIGRATIONS: readonly OutboxMigration[] = [
${body}
];

/**
 * Per migration (parallel to OUTBOX_MIGRATIONS), per statement: the statement split where it
 * names the schema \`outbox\`. Joined with a named outbox's quoted schema, they are its statements.
 */
export const OUTBOX_MIGRATION_FRAGMENTS: readonly (readonly (readonly string[])[])[] = [
${fragments}
];

/**
 * The statements that create or drop functions and triggers, which drizzle-kit cannot generate
 * from the drizzle tables: [index into OUTBOX_MIGRATIONS, index into its statements], in order.
 */
export const OUTBOX_ROUTINE_STATEMENTS: readonly (readonly [number, number])[] = ${JSON.stringify(extra.statements)};

/** The functions and triggers (with their table) the migrations leave in an outbox's schema. */
export const OUTBOX_ROUTINES: { readonly functions: readonly string[]; readonly triggers: readonly { readonly name: string; readonly table: string }[] } = ${JSON.stringify({ functions: extra.functions, triggers: extra.triggers })};
`;
}

async function main() {
  const check = process.argv.includes('--check');
  const text = render(await readMigrations());
  const current = await readFile(OUT_FILE, 'utf8').catch(() => null);
  const rel = path.relative(process.cwd(), OUT_FILE);
  if (current === text) {
    console.log(`gen-sql: ${rel} is up to date`);
    return;
  }
  if (check) {
    console.error(`gen-sql: ${rel} is ${current === null ? 'missing' : 'stale'}; run node scripts/gen-sql.mjs`);
    process.exit(1);
  }
  await mkdir(path.dirname(OUT_FILE), { recursive: true });
  await writeFile(OUT_FILE, text);
  console.log(`gen-sql: wrote ${rel}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err) => {
    console.error(`gen-sql: ${err.message}`);
    process.exit(1);
  });
}
