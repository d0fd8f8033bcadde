// The attempt ledger as the PostgreSQL store's readers see it (js-shim/src/stores/pg/sql/attempts.ts):
// attempt rows, plus the final attempt of each succeeded job, which its job row records. Tests
// that check attempts by SQL read this, not outbox.attempt alone.
import { attemptLedger } from '../../js-shim/src/stores/pg/sql/attempts.ts';

/** `FROM ${ATTEMPTS} a`: the default outbox's ledger, with the attempt table's column names. */
export const ATTEMPTS = attemptLedger('outbox');
