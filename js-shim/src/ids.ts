import { V7Generator } from 'uuidv7';

// uuidv7's default generator draws random words 8 at a time, one crypto call per few ids; a
// 5000-job list then spends most of its id time in those calls. 1024 words a call keeps ids
// for such a list to a few ms. One generator per isolate keeps its ids monotonic.
const words = new Uint32Array(1024);
let next = words.length;
const generator = new V7Generator({
  nextUint32() {
    if (next === words.length) {
      crypto.getRandomValues(words);
      next = 0;
    }
    return words[next++]!;
  },
});

/** The default job id: a uuidv7, time-ordered (index locality), so a list's ids follow its order. */
export const uuidv7 = (): string => generator.generate().toString();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A job id as PostgreSQL's `uuid` reads it (any version). */
export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);
