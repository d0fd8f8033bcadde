// What README.md's ts blocks take as given (scripts/check-readme.mjs): the Worker's bindings,
// the app's own helpers, and the names a fragment continues from an earlier block.
import type { JobDefinition, Outbox, TxEnqueue } from 'postbox';
import type pg from 'pg';

declare global {
  /** The reference Worker's bindings (wrangler.jsonc). */
  interface Env {
    OUTBOX_DB: Hyperdrive;
    /** The databases of the several-databases example. */
    HYPERDRIVE_EU: Hyperdrive;
    HYPERDRIVE_US: Hyperdrive;
    OUTBOX_QUEUE: Queue;
    CF_VERSION_METADATA: WorkerVersionMetadata;
    /** The dashboard's CSRF signing secret (a Worker secret). */
    DASHBOARD_SECRET: string;
    /** Webhook signing secrets per endpoint id, and a receiver's own secret. */
    WEBHOOK_SECRETS: Record<string, string>;
    WEBHOOK_SECRET: string;
  }
  /** In fragments inside `outbox.transaction`: its enqueue, and the app's subscription and event. */
  const enqueue: TxEnqueue;
  const sub: { id: string; url: string };
  const event: { id: string; type: string };
  /** The app's own operator login: who may use the dashboard, and how far. */
  function operatorOf(request: Request, env: Env): Promise<true | { tenantKey: string } | { readOnly: true } | null>;
  /** The app's mail API, which jobs.ts calls. */
  function send(userId: string, opts: { signal: AbortSignal; idempotencyKey: string }): Promise<{ status: number; retryAfterMs?: number }>;
  /** The app's export pages and their upload, which the heartbeat example's job calls. */
  function pagesOf(orgId: string, opts: { signal: AbortSignal }): AsyncIterable<Uint8Array>;
  /** A provider SMS client (the flow-control example). */
  const sms: { send(to: string, text: string, opts: { signal: AbortSignal }): Promise<void> };
  function upload(page: Uint8Array): Promise<void>;
  /** In fragments: the invocation's bindings, a connected client, and index.ts's factory. */
  const env: Env;
  const client: pg.Client;
  const pool: pg.Pool;
  const outboxFor: (env: Env) => Outbox;
  const welcomeEmail: JobDefinition<{ userId: string }>;
}
