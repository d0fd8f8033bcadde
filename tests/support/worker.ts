/**
 * Runs a Worker module inside workerd (Miniflare 4) for integration tests.
 *
 * Miniflare does not bundle npm imports, so the entry is bundled first with esbuild the way
 * wrangler does it for `nodejs_compat` Workers:
 *
 * - `conditions: ['workerd', 'worker', 'browser']`, so `pg` picks `pg-cloudflare`'s socket
 *   (`cloudflare:sockets`) instead of `node:net`;
 * - Node built-ins (`node:x` and bare `x`) and `cloudflare:*` stay external: workerd provides
 *   them under `nodejs_compat`. A CommonJS `require('events')` inside a dependency is turned into
 *   an ESM import of `node:events` (esbuild's ESM output cannot `require` externals at run time);
 * - `.wasm` imports use esbuild's `copy` loader: the file is copied next to the bundle and the
 *   `import mod from './x.wasm'` statement is kept. Miniflare then loads the bundle with
 *   `modulesRoot` = the bundle's directory and the rule `{ type: 'CompiledWasm',
 *   include: ['**\/*.wasm'] }`, so the import yields a `WebAssembly.Module` exactly as in
 *   production (no compiling from bytes at run time).
 *
 * - `postbox` / `postbox/*` imports resolve to js-shim/src/*.ts (through js-shim/package.json's
 *   `exports` and `imports` maps, `dist/x.js` → `src/x.ts`): tests run the current sources.
 *
 * Bundles are cached per entry path for the life of the process (in a temp dir removed at exit).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { Log, LogLevel, Miniflare } from 'miniflare';

/**
 * Miniflare's local Hyperdrive proxy runs in this process and pipes a workerd socket to a
 * database socket (`net.createServer` + `net.connect`) with no error listener on either. When a
 * test kills or refuses a Worker's database connection, a reset on one side then throws here
 * as an uncaught exception instead of failing the Worker's query. Every socket those two
 * functions make gets a listener; the Worker still sees the failure through its own socket.
 */
function quietProxySockets(): void {
  const marked = net as typeof net & { postboxQuiet?: boolean };
  if (marked.postboxQuiet) return;
  marked.postboxQuiet = true;
  const ignore = () => undefined;
  const prepare = (socket: net.Socket) => {
    if (proxyNoDelay) socket.setNoDelay(true);
    return socket.on('error', ignore);
  };
  const createServer = net.createServer;
  (net as { createServer: unknown }).createServer = (...args: Parameters<typeof net.createServer>) =>
    createServer(...args).on('connection', prepare);
  const connect = net.connect;
  (net as { connect: unknown }).connect = (...args: unknown[]) => prepare((connect as (...a: unknown[]) => net.Socket)(...args));
}

let proxyNoDelay = false;

/**
 * For bench/hyperdrive.ts only: sockets the local Hyperdrive proxy opens from now on turn
 * Nagle's algorithm off (TCP_NODELAY), which Miniflare's proxy leaves on. Shows what its
 * delayed-ACK waits cost; wrangler dev itself does not do this.
 */
export function setProxyNoDelay(on: boolean): void {
  proxyNoDelay = on;
}
quietProxySockets();

/** Compatibility date for test Workers (supported by miniflare 4.20260426.0 / its workerd). */
export const DEFAULT_COMPATIBILITY_DATE = '2026-04-20';

export interface StartWorkerOptions {
  /** Path of the Worker module (TS or JS), absolute or relative to the current directory. */
  entry: string;
  /** Connection URL of the database; it must carry a user and a password. Omitted: no Hyperdrive binding. */
  databaseUrl?: string;
  /** D1 bindings (names); each is an empty local database for this Miniflare instance. */
  d1Databases?: string[];
  /** Durable Object bindings: binding name → class exported by the entry (SQLite-backed when `useSQLite`). */
  durableObjects?: Record<string, { className: string; useSQLite?: boolean }>;
  /** Queue bindings. Consumers deliver to this same Worker's `queue()` handler. */
  queues?: {
    /** Binding name → queue name. */
    producers: Record<string, string>;
    consumers?: {
      queue: string;
      maxBatchSize?: number;
      /** Seconds. */
      maxBatchTimeout?: number;
      maxRetries?: number;
      deadLetterQueue?: string;
    }[];
  };
  /** Name of the Hyperdrive binding pointing at `databaseUrl`. Default `OUTBOX_DB`. */
  hyperdriveBinding?: string;
  /** More Hyperdrive bindings: binding name → connection URL (with a user and a password), beside `databaseUrl`'s. */
  hyperdrives?: Record<string, string>;
  /** Plain-text `env` vars. */
  vars?: Record<string, string>;
  /** Default {@link DEFAULT_COMPATIBILITY_DATE}. */
  compatibilityDate?: string;
}

/** What `queue()` reports back (workerd's `FetcherQueueResult`). */
export interface QueueResult {
  /** `ok`, `exception`, `exceededCpu`, … */
  outcome: string;
  ackAll: boolean;
  retryBatch: { retry: boolean; delaySeconds?: number };
  explicitAcks: string[];
  retryMessages: { msgId: string; delaySeconds?: number }[];
}

/** What `scheduled()` reports back (workerd's `FetcherScheduledResult`). */
export interface ScheduledResult {
  outcome: string;
  noRetry: boolean;
}

export interface TestWorker {
  mf: Miniflare;
  /** `path` is resolved against `http://localhost`, e.g. `/version?x=1`. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Delivers one batch straight to the Worker's `queue()` handler (bypassing the queue). */
  queue(
    queueName: string,
    messages: { id?: string; body: unknown; attempts?: number; timestamp?: Date }[],
  ): Promise<QueueResult>;
  /** Calls the Worker's `scheduled()` handler. `scheduledTime` is in ms (default: now). */
  scheduled(opts: { cron: string; scheduledTime?: number }): Promise<ScheduledResult>;
  dispose(): Promise<void>;
}

interface Bundle {
  dir: string;
  /** The bundle's file name inside `dir`. */
  main: string;
}

const bundles = new Map<string, Promise<Bundle>>();
let bundleRoot: string | undefined;

function getBundleRoot(): string {
  if (!bundleRoot) {
    const root = mkdtempSync(path.join(os.tmpdir(), 'postbox-worker-'));
    bundleRoot = root;
    process.on('exit', () => rmSync(root, { recursive: true, force: true }));
  }
  return bundleRoot;
}

const NODE_BUILTINS = new Set(builtinModules.filter((m) => !m.startsWith('_')));
const isBuiltin = (p: string): boolean => p.startsWith('node:') || NODE_BUILTINS.has(p.split('/')[0]!);

/** esbuild plugin: externals for workerd, and `require()` of built-ins made into imports. */
const workerdExternals: esbuild.Plugin = {
  name: 'postbox-workerd-externals',
  setup(build) {
    build.onResolve({ filter: /^cloudflare:/ }, (args) => ({ path: args.path, external: true }));
    build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) => {
      if (!isBuiltin(args.path)) return undefined;
      const spec = args.path.startsWith('node:') ? args.path : `node:${args.path}`;
      if (args.kind === 'require-call') return { path: spec, namespace: 'postbox-node-require' };
      return { path: spec, external: true };
    });
    build.onLoad({ filter: /.*/, namespace: 'postbox-node-require' }, (args) => ({
      contents: `import * as ns from ${JSON.stringify(args.path)};\nmodule.exports = ns.default ?? ns;\n`,
      loader: 'js',
    }));
    // pg's optional native binding is never used in a Worker.
    build.onResolve({ filter: /^pg-native$/ }, () => ({ path: 'pg-native', namespace: 'postbox-empty' }));
    build.onLoad({ filter: /.*/, namespace: 'postbox-empty' }, () => ({ contents: 'module.exports = {};', loader: 'js' }));
  },
};

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const shimDir = path.join(repoRoot, 'js-shim');

/**
 * Maps a target of js-shim/package.json's `exports`/`imports` from the built file to its source:
 * `./dist/x/index.js` → `js-shim/src/x/index.ts` when that exists. Other targets (the core's
 * `.wasm`) stay as they are.
 */
function shimSource(target: string): string {
  const m = /^\.\/dist\/(.*)\.js$/.exec(target);
  if (m) {
    const src = path.join(shimDir, 'src', `${m[1]}.ts`);
    if (existsSync(src)) return src;
  }
  return path.join(shimDir, target);
}

function pickCondition(entry: unknown, conditions: string[]): string | undefined {
  if (typeof entry === 'string') return entry;
  if (entry && typeof entry === 'object') {
    for (const [cond, value] of Object.entries(entry)) {
      if (cond === 'types') continue;
      if (cond === 'default' || conditions.includes(cond)) {
        const hit = pickCondition(value, conditions);
        if (hit) return hit;
      }
    }
  }
  return undefined;
}

/**
 * esbuild plugin: `postbox` and `postbox/*` (and js-shim's own `#imports`) resolve to
 * js-shim/src/*.ts, so tests always run the current sources and need no `npm run build`.
 */
const postboxFromSource: esbuild.Plugin = {
  name: 'postbox-from-source',
  setup(build) {
    const pkg = JSON.parse(readFileSync(path.join(shimDir, 'package.json'), 'utf8')) as {
      exports?: Record<string, unknown>;
      imports?: Record<string, unknown>;
    };
    const conditions = ['workerd', 'worker', 'browser', 'import'];
    build.onResolve({ filter: /^postbox(\/.*)?$/ }, (args) => {
      const key = `.${args.path.slice('postbox'.length)}`;
      const target = pickCondition(pkg.exports?.[key], conditions);
      return target ? { path: shimSource(target) } : undefined;
    });
    build.onResolve({ filter: /^#/ }, (args) => {
      if (!args.importer.startsWith(shimDir + path.sep)) return undefined;
      const target = pickCondition(pkg.imports?.[args.path], conditions);
      return target ? { path: shimSource(target) } : undefined;
    });
  },
};

/** Bundles `entry` (once per process) and returns where the bundle is. */
export function bundleWorker(entry: string): Promise<Bundle> {
  const abs = path.resolve(entry);
  let p = bundles.get(abs);
  if (!p) {
    p = (async () => {
      const dir = mkdtempSync(path.join(getBundleRoot(), `${path.basename(abs).replace(/\W+/g, '_')}-`));
      await esbuild.build({
        entryPoints: [abs],
        outfile: path.join(dir, 'worker.mjs'),
        bundle: true,
        format: 'esm',
        platform: 'neutral',
        target: 'es2022',
        conditions: ['workerd', 'worker', 'browser'],
        mainFields: ['module', 'main'],
        loader: { '.wasm': 'copy' },
        assetNames: '[name]-[hash]',
        plugins: [postboxFromSource, workerdExternals],
        sourcemap: 'inline',
        logLevel: 'silent',
      });
      return { dir, main: 'worker.mjs' };
    })();
    bundles.set(abs, p);
    p.catch(() => bundles.delete(abs));
  }
  return p;
}

/** Bundles `opts.entry` and starts it in Miniflare. Call `dispose()` when done. */
export async function startWorker(opts: StartWorkerOptions): Promise<TestWorker> {
  const { dir, main } = await bundleWorker(opts.entry);
  for (const databaseUrl of [opts.databaseUrl, ...Object.values(opts.hyperdrives ?? {})]) {
    if (databaseUrl === undefined) continue;
    const url = new URL(databaseUrl);
    if (!url.username || !url.password) {
      throw new Error('startWorker: a database URL needs a user and a password (Hyperdrive requires them)');
    }
  }
  const consumers: Record<string, { maxBatchSize?: number; maxBatchTimeout?: number; maxRetries?: number; deadLetterQueue?: string }> = {};
  for (const c of opts.queues?.consumers ?? []) {
    const { queue, ...rest } = c;
    consumers[queue] = rest;
  }
  const producers: Record<string, { queueName: string }> = {};
  for (const [binding, queueName] of Object.entries(opts.queues?.producers ?? {})) producers[binding] = { queueName };

  const mf = new Miniflare({
    log: new Log(process.env.POSTBOX_MF_LOG ? LogLevel.DEBUG : LogLevel.WARN),
    // No network fetch of the Request.cf object: use Miniflare's placeholder.
    cf: false,
    modules: true,
    modulesRoot: dir,
    scriptPath: path.join(dir, main),
    modulesRules: [{ type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: opts.compatibilityDate ?? DEFAULT_COMPATIBILITY_DATE,
    compatibilityFlags: ['nodejs_compat'],
    hyperdrives: { ...(opts.databaseUrl === undefined ? {} : { [opts.hyperdriveBinding ?? 'OUTBOX_DB']: opts.databaseUrl }), ...opts.hyperdrives },
    d1Databases: opts.d1Databases ?? [],
    durableObjects: opts.durableObjects ?? {},
    queueProducers: producers,
    queueConsumers: consumers,
    bindings: { ...(opts.vars ?? {}) },
  });
  await mf.ready;

  return {
    mf,
    async fetch(p, init) {
      const res = await mf.dispatchFetch(new URL(p, 'http://localhost').href, init as never);
      return res as unknown as Response;
    },
    async queue(queueName, messages) {
      const worker = await mf.getWorker();
      const result = await worker.queue(
        queueName,
        messages.map((m) => ({
          id: m.id ?? randomUUID(),
          body: m.body,
          attempts: m.attempts ?? 1,
          timestamp: m.timestamp ?? new Date(),
        })),
      );
      return result as unknown as QueueResult;
    },
    async scheduled({ cron, scheduledTime }) {
      const worker = await mf.getWorker();
      const result = await worker.scheduled({ cron, scheduledTime: new Date(scheduledTime ?? Date.now()) });
      return result as unknown as ScheduledResult;
    },
    dispose: () => mf.dispose(),
  };
}
