-- Roles and guardrails for Postbox. Run as the owner of the outbox schema, after the
-- migrations (psql -v worker=… -v app=… -f examples/roles/roles.sql, or edit the two names).
-- A named outbox lives in its own schema: add -v schema=outbox_<name> (default: outbox).
--
-- postbox_worker: the role the queue consumer and the cron sweep connect as. It runs every
-- outbox statement, and also your handlers' ctx.db writes, ok({ commit }) and onTransition
-- hooks, so grant it what those touch too (see the end).
-- postbox_app: the role your fetch handlers connect as. It enqueues and may read jobs; it
-- cannot change or delete them, so only the outbox decides a job's fate.
--
-- No password is set here (none lands in shell history or logs): set one with \password in
-- psql or in your provider's console before the role can log in.
\if :{?worker}
\else
  \set worker postbox_worker
\endif
\if :{?app}
\else
  \set app postbox_app
\endif
\if :{?schema}
\else
  \set schema outbox
\endif

SELECT format('CREATE ROLE %I LOGIN', :'worker') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'worker') \gexec
SELECT format('CREATE ROLE %I LOGIN', :'app') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'app') \gexec

GRANT USAGE ON SCHEMA :"schema" TO :"worker", :"app";
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".job, :"schema".attempt TO :"worker";
-- Job dependencies: edges go with their jobs (retention, eraseTenant); enqueue with dependsOn adds them.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".job_edge TO :"worker";
-- The cron handler records each schedule's latest occurrence here (catch-up after missed ticks).
GRANT SELECT, INSERT, UPDATE ON :"schema".schedule_run TO :"worker";
-- postbox/webhooks: each endpoint's breaker, created by its first delivery, updated after each.
GRANT SELECT, INSERT, UPDATE ON :"schema".webhook_endpoint TO :"worker";
GRANT SELECT, INSERT, UPDATE ON :"schema".index_baseline TO :"worker";
-- Flow limits' slots: created by the first claim that needs them, then taken and released.
GRANT SELECT, INSERT, UPDATE ON :"schema".kind_slot TO :"worker";
-- Enqueue inserts, and reads the row holding a dedupe key back; inspection reads attempts.
GRANT SELECT, INSERT ON :"schema".job TO :"app";
GRANT SELECT ON :"schema".attempt TO :"app";
-- dependsOn: the parents' states are read and the edges inserted with the children.
GRANT SELECT, INSERT ON :"schema".job_edge TO :"app";
-- Every table above is granted by name: default privileges reach only tables created after
-- this file runs (by the role running it). They give a later migration's tables these grants.
ALTER DEFAULT PRIVILEGES IN SCHEMA :"schema" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"worker";
ALTER DEFAULT PRIVILEGES IN SCHEMA :"schema" GRANT SELECT ON TABLES TO :"app";

-- Settings live on the role, not in a SET: behind a transaction-pooling proxy (Hyperdrive) a
-- session SET would leak to the next client. They apply to new sessions.
-- Required: a transaction orphaned by a dead isolate must not hold its row locks for ever.
ALTER ROLE :"worker" SET idle_in_transaction_session_timeout = '60s';
-- A statement waiting on a lock fails rather than queueing behind it (the sweep retries).
ALTER ROLE :"worker" SET lock_timeout = '5s';
-- No single statement outlives a Worker invocation's 15 minutes.
ALTER ROLE :"worker" SET statement_timeout = '14min';
-- The outbox's statements are short and many; a large backlog can lift a claim's estimate past
-- jit_above_cost, and compiling it (on servers built with JIT) costs far more than running it.
ALTER ROLE :"worker" SET jit = off;
-- The app's own transactions get the same protection against orphaned locks.
ALTER ROLE :"app" SET idle_in_transaction_session_timeout = '60s';
-- PostgreSQL 17's MAINTAIN privilege lets the worker rebuild the outbox's indexes after a held
-- horizon bloated them (the sweep's compact step, REINDEX CONCURRENTLY); before 17 only the
-- tables' owner may, and the sweep reports the rebuild it could not run (event compaction_refused).
SELECT format('GRANT MAINTAIN ON %I.job, %I.attempt TO %I', :'schema', :'schema', :'worker')
 WHERE current_setting('server_version_num')::int >= 170000 \gexec
-- PostgreSQL 17 adds transaction_timeout: no transaction outlives an invocation.
SELECT format('ALTER ROLE %I SET transaction_timeout = %L', :'worker', '15min')
 WHERE current_setting('server_version_num')::int >= 170000 \gexec

-- Then grant the worker what your handlers touch, e.g.:
-- GRANT SELECT, UPDATE ON public.users TO postbox_worker;
