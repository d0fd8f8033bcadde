/**
 * OpenTelemetry for an outbox: spans and metrics of its enqueues, attempts, claim statements
 * and sweeps, through `@opentelemetry/api` (an optional peer dependency: install it to use this
 * entry point). The API is a no-op until an SDK is registered, so an outbox given
 * `openTelemetry()` and no SDK costs the API's no-op calls; Postbox bundles no SDK.
 *
 * Attributes follow OpenTelemetry's messaging conventions: `messaging.system` is `postbox`, the
 * destination is the job's kind, the message id its job id; Postbox's own are `postbox.*`.
 *
 * @example
 * ```ts
 * import { openTelemetry } from 'postbox/otel';
 * const outbox = createOutbox({ jobs, connect, telemetry: openTelemetry() });
 * ```
 * @module
 */
import { ProxyTracerProvider, SpanKind, SpanStatusCode, createNoopMeter, isSpanContextValid, metrics, trace, type Attributes, type Link, type Meter, type Span, type SpanContext, type Tracer } from '@opentelemetry/api';
import type { AttemptTrace, EnqueueTrace, OperationTrace, Telemetry } from '../types.js';

/** Options of {@link openTelemetry}: a tracer and a meter of your own (default: the global providers', named `postbox`). */
export interface OpenTelemetryOptions {
  tracer?: Tracer;
  meter?: Meter;
}

/** The instruments Postbox records, by name (see the README's OpenTelemetry section). */
export const METRIC_NAMES = {
  /** Counter: attempts settled, by kind, outcome and resulting status (recovered crashes included). */
  attempts: 'postbox.attempts',
  /** Histogram (s): how long each attempt's handler ran, by kind and outcome. */
  attemptDuration: 'postbox.attempt.duration',
  /** Counter: attempts whose job was scheduled to retry, by kind and error code. */
  retries: 'postbox.retries',
  /** Counter: jobs dead-lettered, by kind and error code. */
  deadLetters: 'postbox.dead_letters',
  /** Counter: enqueued items, by kind and result (`created`, `exists`, `refused`). */
  enqueued: 'postbox.enqueued',
  /** Histogram (s): from a job's enqueue to the start of its first attempt, by kind. */
  enqueueToStart: 'postbox.enqueue_to_start',
  /** Observable gauge: jobs pending, retrying and running, by kind, lane and status, as the last sweep counted them. */
  backlog: 'postbox.backlog',
} as const;

const SYSTEM = 'postbox';

type BacklogValues = Map<string, { attributes: Attributes; count: number }>;
/** Each meter's backlog gauge values: one gauge per meter, however many outboxes (one per invocation) report to it. */
const backlogs = new WeakMap<Meter, BacklogValues>();

/**
 * The backlog as the last sweep counted it, observed by the meter's `postbox.backlog` gauge. A
 * kind, lane and status seen before and absent now reads 0, so a drained backlog shows as 0
 * rather than as its last value.
 */
function backlogOf(meter: Meter): BacklogValues {
  let values = backlogs.get(meter);
  if (values) return values;
  const made: BacklogValues = new Map();
  backlogs.set(meter, made);
  meter
    .createObservableGauge(METRIC_NAMES.backlog, { description: 'Jobs pending, retrying and running, as the last sweep counted them', unit: '{job}' })
    .addCallback((result) => {
      for (const { attributes, count } of made.values()) result.observe(count, attributes);
    });
  return made;
}

/**
 * A {@link Telemetry} over OpenTelemetry's API, for `createOutbox({ telemetry })` or
 * `createSqliteOutbox({ telemetry })`: a producer span per enqueue call (`send <kind>`), a
 * consumer span per attempt (`process <kind>`) from its start to its settlement, linked to the
 * enqueue's span, a span per claim statement and per sweep, and the counters and histograms of
 * {@link METRIC_NAMES}. `undefined` when nothing would record it (no SDK registered, no `tracer`
 * or `meter` given): the outbox then does no telemetry work at all. Make it where you make the
 * outbox (per invocation), after your SDK is registered.
 */
export function openTelemetry(options: OpenTelemetryOptions = {}): Telemetry | undefined {
  // Nothing records (no SDK registered, no tracer or meter given): no telemetry at all, so the
  // outbox does none of its work, not even the API's no-op calls.
  if (!records(options)) return undefined;
  const tracer = options.tracer ?? trace.getTracer(SYSTEM);
  const meter = options.meter ?? metrics.getMeter(SYSTEM);
  const attempts = meter.createCounter(METRIC_NAMES.attempts, { description: 'Attempts settled', unit: '{attempt}' });
  const duration = meter.createHistogram(METRIC_NAMES.attemptDuration, {
    description: 'How long an attempt\'s handler ran',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300] },
  });
  const retries = meter.createCounter(METRIC_NAMES.retries, { description: 'Attempts whose job will retry', unit: '{attempt}' });
  const deadLetters = meter.createCounter(METRIC_NAMES.deadLetters, { description: 'Jobs dead-lettered', unit: '{job}' });
  const enqueued = meter.createCounter(METRIC_NAMES.enqueued, { description: 'Items enqueued, by result', unit: '{job}' });
  const waited = meter.createHistogram(METRIC_NAMES.enqueueToStart, {
    description: 'From a job\'s enqueue to the start of its first attempt',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600] },
  });

  const backlog = backlogOf(meter);

  // A job's attribute sets repeat (a few kinds, outcomes and codes): made once each, not per
  // attempt, and found without building a key.
  const byOutcomeStatus = memo((kind, outcome, status) => ({ 'messaging.destination.name': kind, 'postbox.outcome': outcome, 'postbox.status': status }));
  const byOutcome = memo((kind, outcome) => ({ 'messaging.destination.name': kind, 'postbox.outcome': outcome }));
  const byCode = memo((kind, code) => ({ 'messaging.destination.name': kind, 'error.type': code }));
  const byResult = memo((kind, result) => ({ 'messaging.destination.name': kind, 'postbox.result': result }));
  const byLane = memo((kind, lane) => ({ 'messaging.destination.name': kind, 'postbox.lane': lane }));

  /** The metrics every settlement records, run or not. */
  const settledMetrics = (kind: string, outcome: string, status: string, code: string | null) => {
    attempts.add(1, byOutcomeStatus(kind, outcome, status));
    if (status === 'retrying') retries.add(1, byCode(kind, code ?? outcome));
    else if (status === 'dead') deadLetters.add(1, byCode(kind, code ?? outcome));
  };

  return {
    // Something records (checked above): attempts link to their enqueue and time their wait.
    needsJobContext: true,

    backlog(counts) {
      for (const entry of backlog.values()) entry.count = 0;
      for (const { kind, lane, status, count } of counts) {
        const key = `${kind}\0${lane}\0${status}`;
        const entry = backlog.get(key);
        if (entry) entry.count = count;
        else backlog.set(key, { attributes: { 'messaging.destination.name': kind, 'postbox.lane': lane, 'postbox.status': status }, count });
      }
    },

    enqueue(info): EnqueueTrace {
      const span = tracer.startSpan(`send ${info.kind}`, { kind: SpanKind.PRODUCER });
      // Attributes only for a span that records: with no SDK, building them would be the whole cost.
      if (span.isRecording()) {
        span.setAttributes({
          'messaging.system': SYSTEM,
          'messaging.operation.type': 'send',
          'messaging.operation.name': info.api,
          'messaging.destination.name': info.kind,
          'messaging.batch.message_count': info.count,
          'postbox.lane': info.lane,
        });
      }
      return {
        context: traceparent(span.spanContext()),
        end(result) {
          if (result.created) enqueued.add(result.created, byResult(info.kind, 'created'));
          if (result.exists) enqueued.add(result.exists, byResult(info.kind, 'exists'));
          if (result.refused) enqueued.add(result.refused, byResult(info.kind, 'refused'));
          if (span.isRecording()) span.setAttributes({ 'postbox.created': result.created, 'postbox.exists': result.exists, 'postbox.refused': result.refused });
          endSpan(span, result.error);
        },
      };
    },

    attempt(info): AttemptTrace {
      // Linked, not parented, to the enqueue: the attempt runs in its own invocation's trace, and
      // a retried job's attempts are siblings under the one link.
      const enqueuedBy = parseTraceparent(info.traceContext);
      const links: Link[] = enqueuedBy ? [{ context: enqueuedBy }] : [];
      const span = tracer.startSpan(`process ${info.kind}`, { kind: SpanKind.CONSUMER, links });
      if (info.attempt === 1) waited.record(Math.max(0, info.startedAt - info.enqueuedAt) / 1000, byLane(info.kind, info.lane));
      const recording = span.isRecording();
      if (recording) {
        span.setAttributes({
          'messaging.system': SYSTEM,
          'messaging.operation.type': 'process',
          'messaging.operation.name': 'process',
          'messaging.destination.name': info.kind,
          'messaging.message.id': info.jobId,
          'postbox.lane': info.lane,
          'postbox.attempt': info.attempt,
        });
        if (info.tenantKey !== null) span.setAttribute('postbox.tenant_key', info.tenantKey);
      }
      const startedAt = performance.now();
      let ranMs: number | null = null;
      return {
        ran() {
          ranMs ??= performance.now() - startedAt;
        },
        settled(result) {
          const outcome = result.stale ? 'stale' : result.outcome;
          duration.record((ranMs ?? performance.now() - startedAt) / 1000, byOutcome(info.kind, outcome));
          if (!result.stale) settledMetrics(info.kind, result.outcome, result.status, result.code);
          if (recording) {
            span.setAttributes({ 'postbox.outcome': outcome, 'postbox.status': result.status });
            if (result.code !== null) span.setAttribute('error.type', result.code);
            // A success, or a job moved on by someone else, is not this span's error.
            if (result.stale || result.outcome === 'ok') span.setStatus({ code: SpanStatusCode.OK });
            else span.setStatus({ code: SpanStatusCode.ERROR, message: result.message ?? result.code ?? result.outcome });
          }
          span.end();
        },
        abandoned(reason) {
          span.setAttribute('postbox.outcome', reason);
          span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
          span.end();
        },
      };
    },

    settledUnrun(info) {
      settledMetrics(info.kind, info.outcome, info.status, info.code);
    },

    operation(name, attributes): OperationTrace {
      const span = tracer.startSpan(`postbox ${name}`, { kind: SpanKind.INTERNAL });
      if (span.isRecording()) span.setAttributes({ 'messaging.system': SYSTEM, ...prefixed(attributes) });
      return {
        end(result = {}) {
          if (result.attributes && span.isRecording()) span.setAttributes(prefixed(result.attributes));
          endSpan(span, result.error);
        },
      };
    },
  };
}

/**
 * Whether a tracer or a meter here records anything: one of your own, or an SDK registered
 * with the global providers. Without either every call would be a no-op.
 */
function records(options: OpenTelemetryOptions): boolean {
  if (options.tracer || options.meter) return true;
  const provider = trace.getTracerProvider();
  const tracing = !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer(SYSTEM) !== undefined;
  return tracing || metrics.getMeter(SYSTEM) !== createNoopMeter();
}

/**
 * A lookup of attribute sets by their values (two or three of them), made on first use and kept:
 * kinds, outcomes, statuses and lanes are few. Error codes are the handlers' own, so each level
 * keeps at most 256 entries and makes a fresh set past that.
 */
function memo(make: (a: string, b: string, c: string) => Attributes): (a: string, b: string, c?: string) => Attributes {
  const root = new Map<string, Map<string, Attributes | Map<string, Attributes>>>();
  return (a, b, c) => {
    let level = root.get(a);
    if (!level) {
      level = new Map();
      if (root.size < 256) root.set(a, level);
    }
    if (c === undefined) {
      let set = level.get(b) as Attributes | undefined;
      if (!set) {
        set = make(a, b, '');
        if (level.size < 256) level.set(b, set);
      }
      return set;
    }
    let inner = level.get(b) as Map<string, Attributes> | undefined;
    if (!inner) {
      inner = new Map();
      if (level.size < 256) level.set(b, inner);
    }
    let set = inner.get(c);
    if (!set) {
      set = make(a, b, c);
      if (inner.size < 256) inner.set(c, set);
    }
    return set;
  };
}

/** Postbox's own attributes carry its prefix. */
function prefixed(attributes: Record<string, string | number>): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) out[`postbox.${key}`] = value;
  return out;
}

function endSpan(span: Span, error: unknown): void {
  if (error !== undefined && error !== null) {
    if (error instanceof Error) span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  }
  span.end();
}

/** A span context as a W3C traceparent (`00-<trace id>-<span id>-<flags>`); null for an invalid one (no SDK, no active trace). */
function traceparent(context: SpanContext): string | null {
  if (!isSpanContextValid(context)) return null;
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The span context a stored traceparent names, or null for none or one that does not parse. */
function parseTraceparent(text: string | null): SpanContext | null {
  const m = text === null ? null : TRACEPARENT.exec(text);
  if (!m) return null;
  const context: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true };
  return isSpanContextValid(context) ? context : null;
}
