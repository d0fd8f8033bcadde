/**
 * Cloudflare bindings: the queue consumer, the Cron Trigger sweep, the dead-letter consumer
 * and recurring schedules.
 * @module
 */
export { createQueueHandler, createDlqHandler, type QueueBatch, type OutboxFactory } from './queue.js';
export { createScheduledHandler, type ScheduledOptions, type ScheduledEvent, type ScheduledReport } from './scheduled.js';
export { defineSchedule, type Schedule, type ScheduleSpec } from './schedule.js';
