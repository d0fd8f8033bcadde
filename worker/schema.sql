-- The reference app's own tables (the outbox's live in schema `outbox`, from migrations/).
-- Idempotent: scripts/dev.mjs applies it on every start, after the outbox migrations.

CREATE TABLE IF NOT EXISTS public.app_user (
  id         uuid        PRIMARY KEY,
  email      text        NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT app_user_email_key UNIQUE (email)
);

-- The "email provider": the welcome job records what it sent here. The idempotency key makes a
-- re-run of the same job (at-least-once delivery) a no-op.
CREATE TABLE IF NOT EXISTS public.sent_email (
  id              bigserial   PRIMARY KEY,
  idempotency_key text        NOT NULL UNIQUE,
  user_id         uuid        NOT NULL,
  to_email        text        NOT NULL,
  template        text        NOT NULL,
  sent_at         timestamptz NOT NULL DEFAULT now()
);

-- The "CRM": one row per user, upserted by crm.sync.
CREATE TABLE IF NOT EXISTS public.crm_contact (
  user_id   uuid        PRIMARY KEY,
  email     text        NOT NULL,
  synced_at timestamptz NOT NULL DEFAULT now()
);

-- The "webhook receiver": deliveries that were accepted.
CREATE TABLE IF NOT EXISTS public.webhook_delivery (
  idempotency_key text        PRIMARY KEY,
  event           text        NOT NULL,
  user_id         uuid        NOT NULL,
  delivered_at    timestamptz NOT NULL DEFAULT now()
);
