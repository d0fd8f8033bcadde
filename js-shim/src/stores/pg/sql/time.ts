/** SQL for an epoch-ms parameter as timestamptz: every time is the caller's clock, never the server's. */
export const ts = (param: string): string => `to_timestamp(${param}::bigint / 1000.0)`;
/** SQL for a timestamptz column as epoch ms. */
export const ms = (column: string): string => `round(extract(epoch from ${column}) * 1000)::bigint`;
