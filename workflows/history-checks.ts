/**
 * The checks workflows made themselves before they moved into activities (issue 27): a tool call's input against its
 * schema, the reply guard's secret rules, and the schedule tool's delivery before named destinations. Histories
 * recorded before replay them here, as they ran. Never imported by a workflow: see olderChecks.
 */
/* eslint-disable @typescript-eslint/no-restricted-imports -- required on first use (older-checks.ts), never imported */
import { Delivery } from '../domain/delivery';
import { checkReply, guardErrorForModel } from '../domain/reply-guard';
import { parseToolCall, scheduleTool } from '../domain/tools';
/* eslint-enable @typescript-eslint/no-restricted-imports */

export { checkReply, guardErrorForModel, parseToolCall };

/** The schedule tool's input before named destinations: a Delivery object, which the activity now refuses. */
export const legacyScheduleInput = scheduleTool.input.extend({ delivery: Delivery.optional() });
