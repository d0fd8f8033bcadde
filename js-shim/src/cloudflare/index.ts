/**
 * Cloudflare bindings: the queue consumer, the Cron Trigger sweep, the dead-letter consumer
 * and recurring schedules.
 * @module
 */
export {
  createQueueHandler,
  createDlqHandler,
  type QueueBatch,
  type QueueHandlerOptions,
  type OutboxFactory,
  type OutboxFleetFactory,
  type FleetQueueReport,
  type OutboxQueueRun,
} from './queue.js';
export {
  createScheduledHandler,
  type ScheduledOptions,
  type ScheduledEvent,
  type ScheduledReport,
  type FleetScheduledReport,
  type OutboxTick,
  type ScheduleRun,
} from './scheduled.js';
export { defineSchedule, type Schedule, type ScheduleSpec } from './schedule.js';
