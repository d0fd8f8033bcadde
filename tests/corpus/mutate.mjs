// Generated inputs for the differential test (differential.mjs): mutations of the corpus inputs
// and random bytes, from a seeded generator so every run feeds the same bytes.
import { inputBytes, readCorpus } from './lib.mjs';

// mulberry32: small, fast, and the same sequence on every machine.
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n) => Math.floor(next() * n); // [0, n)
  return { next, int, pick: (list) => list[int(list.length)] };
}

// Bytes and tokens where JSON parsers make their decisions: structure, string and escape
// boundaries, UTF-8 lead/continuation bytes, number syntax, atoms.
const SPECIAL_BYTES = Buffer.from('{}[],:"\\ \t\n/-+.eE019tfnu\x00\x01\x1f\x7f\x80\xbf\xc0\xc2\xe0\xed\xef\xf0\xf4\xf8\xff', 'latin1');
const TOKENS = [
  '{', '}', '[', ']', ',', ':', '"', '\\', '""', '{}', '[]', 'true', 'fals', 'null', 'nul', '-', '-0', '1e999',
  '1.', '.5', '0x1', '12345678901234567890', '"\\u', '"\\ud800"', '"\\udc00\\ud800"', '\\"', '/*', '//',
  '\uFEFF', '\u2028', '"op":', '"now":', ',"x":', '[[[[[[[[', ']]]]', '}}}}',
].map((t) => Buffer.from(t, 'utf8'));
const RAW_TOKENS = [[0x80], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x98]].map((b) => Buffer.from(b));
const JSONISH = Buffer.from('{}[],:"\\ 0123456789.-+eEtruefalsn\x80\xff', 'latin1');

function mutateOnce(r, input, sources) {
  const at = r.int(input.length + 1);
  const span = 1 + r.int(8);
  switch (r.int(9)) {
    case 0: { // flip one bit
      if (input.length === 0) return Buffer.from([r.int(256)]);
      const out = Buffer.from(input);
      out[r.int(out.length)] ^= 1 << r.int(8);
      return out;
    }
    case 1: { // overwrite one byte with a special one
      if (input.length === 0) return Buffer.from([r.pick(SPECIAL_BYTES)]);
      const out = Buffer.from(input);
      out[r.int(out.length)] = r.pick(SPECIAL_BYTES);
      return out;
    }
    case 2: // insert a token
      return Buffer.concat([input.subarray(0, at), r.pick(r.int(4) === 0 ? RAW_TOKENS : TOKENS), input.subarray(at)]);
    case 3: // delete a few bytes
      return Buffer.concat([input.subarray(0, at), input.subarray(at + span)]);
    case 4: // truncate
      return input.subarray(0, at);
    case 5: { // duplicate a slice
      const from = r.int(input.length + 1);
      return Buffer.concat([input.subarray(0, at), input.subarray(from, from + span * 4), input.subarray(at)]);
    }
    case 6: { // splice with another corpus input
      const other = r.pick(sources);
      return Buffer.concat([input.subarray(0, at), other.subarray(r.int(other.length + 1))]);
    }
    case 7: // insert a random byte
      return Buffer.concat([input.subarray(0, at), Buffer.from([r.int(256)]), input.subarray(at)]);
    default: { // swap two bytes
      if (input.length < 2) return input;
      const out = Buffer.from(input);
      const i = r.int(out.length);
      const j = r.int(out.length);
      [out[i], out[j]] = [out[j], out[i]];
      return out;
    }
  }
}

// Value-level mutations keep the document well-formed, so the decision logic itself (integer
// bounds, 32- against 64-bit arithmetic, op tables) sees the generated inputs too.
const NUMBERS = [0, 1, -1, 2, 3, 1000, 30000, 600000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 2 ** 53,
  -(2 ** 53), 1.5, 0.5, 1e21, 1700000000000, 1700000060000];

const depth = (value) =>
  value !== null && typeof value === 'object' ? 1 + Math.max(0, ...Object.values(value).map(depth)) : 0;

function nodes(value, out = [], parent = null, key = null) {
  out.push([parent, key]);
  if (value !== null && typeof value === 'object') for (const k of Object.keys(value)) nodes(value[k], out, value, k);
  return out;
}

// The parsed corpus documents and every string in them (keys and values), as material.
function material(sources) {
  const docs = [];
  const strings = new Set(['', 'x', '\u0000', '\u00e9', 'a'.repeat(200)]);
  for (const bytes of sources) {
    try {
      const doc = JSON.parse(bytes.toString('utf8'));
      if (depth(doc) > 32) continue; // the depth-limit cases: cloning them costs, mutating them adds nothing
      docs.push(doc);
      for (const [parent, key] of nodes(doc)) {
        if (parent === null) continue;
        if (!Array.isArray(parent)) strings.add(key);
        if (typeof parent[key] === 'string') strings.add(parent[key]);
      }
    } catch {
      // malformed sources feed the byte mutations only
    }
  }
  return { docs, strings: [...strings] };
}

function someValue(r, m) {
  switch (r.int(5)) {
    case 0: return r.pick(NUMBERS);
    case 1: return r.pick(m.strings);
    case 2: return r.pick([null, true, false, [], {}]);
    case 3: { const all = nodes(r.pick(m.docs)); const [p, k] = r.pick(all); return structuredClone(p === null ? all[0] : p[k]); }
    default: { const n = r.pick(NUMBERS); return Number.isInteger(n) ? n + r.int(3) - 1 : n; }
  }
}

function mutateValue(r, doc, m) {
  const all = nodes(doc);
  const [parent, key] = r.pick(all);
  if (parent === null) return someValue(r, m);
  const value = parent[key];
  switch (r.int(4)) {
    case 0: // drop it
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
      return doc;
    case 1: // grow the container it is in
      if (Array.isArray(parent)) parent.push(structuredClone(value));
      else parent[r.pick(m.strings)] = someValue(r, m);
      return doc;
    case 2: // a nearby integer
      parent[key] = typeof value === 'number' ? value + r.pick([-1, 1, -1000, 1000]) : someValue(r, m);
      return doc;
    default:
      parent[key] = someValue(r, m);
      return doc;
  }
}

// The corpus inputs small enough to mutate cheaply (the multi-MiB size-limit cases are left out).
export function corpusSources(maxBytes = 4096) {
  return readCorpus()
    .filter((c) => c.inputFill === undefined)
    .map((c) => inputBytes(c))
    .filter((b) => b.length <= maxBytes);
}

// `count` inputs from `seed`: 3 in 8 are value-level mutations (mostly one) of a corpus document
// (still JSON), 3 in 8 are 1–4 stacked byte mutations of a corpus input, the rest random bytes
// (uniform, or from a JSON-ish alphabet) of 0–48 bytes.
export function generateInputs(count, seed, sources = corpusSources()) {
  const r = rng(seed);
  const m = material(sources);
  const inputs = new Array(count);
  for (let i = 0; i < count; i++) {
    const kind = r.int(8);
    if (kind < 3) {
      let doc = structuredClone(r.pick(m.docs));
      for (let n = r.int(4) === 0 ? 2 + r.int(2) : 1; n > 0; n--) doc = mutateValue(r, doc, m);
      inputs[i] = Buffer.from(JSON.stringify(doc), 'utf8');
    } else if (kind < 6) {
      let input = r.pick(sources);
      for (let n = 1 + r.int(4); n > 0; n--) input = mutateOnce(r, input, sources);
      inputs[i] = input;
    } else {
      const out = Buffer.alloc(r.int(49));
      const alphabet = kind === 6 ? null : JSONISH;
      for (let j = 0; j < out.length; j++) out[j] = alphabet ? r.pick(alphabet) : r.int(256);
      inputs[i] = out;
    }
  }
  return inputs;
}
