/**
 * Small server-rendered SVG charts: no script, no style attributes (the page's CSP has no
 * 'unsafe-inline'), colours as presentation attributes.
 * @module
 */
import { html, type Html } from './html.js';
import type { RateBucket } from './stats.js';

const W = 560;
const H = 140;
const PAD_L = 40;
const PAD_B = 18;
const PAD_T = 8;
const OK = '#2f855a';
const FAILED = '#c53030';

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 16);

function frame(title: string, yMax: string, buckets: readonly RateBucket[], bucketMs: number, body: Html): Html {
  const first = buckets[0]?.start ?? 0;
  const end = (buckets.at(-1)?.start ?? 0) + bucketMs;
  return html`<figure><figcaption>${title}</figcaption><svg class="chart" role="img" aria-label="${title}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" xmlns="http://www.w3.org/2000/svg">
<title>${title}</title>
<line x1="${PAD_L}" y1="${PAD_T}" x2="${PAD_L}" y2="${H - PAD_B}" stroke="#999"/>
<line x1="${PAD_L}" y1="${H - PAD_B}" x2="${W}" y2="${H - PAD_B}" stroke="#999"/>
<text x="${PAD_L - 4}" y="${PAD_T + 8}" text-anchor="end" font-size="10" fill="#555">${yMax}</text>
<text x="${PAD_L - 4}" y="${H - PAD_B}" text-anchor="end" font-size="10" fill="#555">0</text>
<text x="${PAD_L}" y="${H - 4}" font-size="10" fill="#555">${clock(first)} UTC</text>
<text x="${W}" y="${H - 4}" text-anchor="end" font-size="10" fill="#555">${clock(end)} UTC</text>
${body}
</svg></figure>`;
}

/** Finished attempts per bucket, ok stacked under failed. */
export function throughputChart(buckets: readonly RateBucket[], bucketMs: number): Html {
  const max = Math.max(1, ...buckets.map((b) => b.ok + b.failed));
  const plotH = H - PAD_B - PAD_T;
  const slot = (W - PAD_L) / Math.max(buckets.length, 1);
  const bars = buckets.map((b, i) => {
    const x = (PAD_L + i * slot + 1).toFixed(1);
    const w = Math.max(slot - 2, 1).toFixed(1);
    const okH = (b.ok / max) * plotH;
    const failH = (b.failed / max) * plotH;
    const label = `${clock(b.start)}: ${b.ok} ok, ${b.failed} failed`;
    return html`<g><title>${label}</title><rect x="${x}" y="${(H - PAD_B - okH).toFixed(1)}" width="${w}" height="${okH.toFixed(1)}" fill="${OK}"/><rect x="${x}" y="${(H - PAD_B - okH - failH).toFixed(1)}" width="${w}" height="${failH.toFixed(1)}" fill="${FAILED}"/></g>`;
  });
  return frame('Finished attempts per bucket (green ok, red failed)', String(max), buckets, bucketMs, html`${bars}`);
}

/** Share of finished attempts that failed, per bucket (buckets without attempts are gaps). */
export function failureRateChart(buckets: readonly RateBucket[], bucketMs: number): Html {
  const plotH = H - PAD_B - PAD_T;
  const slot = (W - PAD_L) / Math.max(buckets.length, 1);
  const points = buckets.map((b, i) => {
    const n = b.ok + b.failed;
    if (n === 0) return null;
    const rate = b.failed / n;
    return { x: PAD_L + (i + 0.5) * slot, y: H - PAD_B - rate * plotH, rate, b };
  });
  // One polyline per run of buckets that had attempts.
  const runs: { x: number; y: number }[][] = [];
  let current: { x: number; y: number }[] = [];
  for (const p of points) {
    if (p) current.push(p);
    else if (current.length > 0) {
      runs.push(current);
      current = [];
    }
  }
  if (current.length > 0) runs.push(current);
  const lines = runs.map((run) => html`<polyline fill="none" stroke="${FAILED}" stroke-width="2" points="${run.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ')}"/>`);
  const dots = points.map((p) =>
    p ? html`<circle cx="${p.x.toFixed(1)}" cy="${p.y.toFixed(1)}" r="3" fill="${FAILED}"><title>${clock(p.b.start)}: ${(p.rate * 100).toFixed(0)}% of ${p.b.ok + p.b.failed} failed</title></circle>` : null,
  );
  return frame('Failure rate of finished attempts', '100%', buckets, bucketMs, html`${lines}${dots}`);
}
