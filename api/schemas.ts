import { z } from 'zod';
import { Delivery, Destinations } from '../domain/delivery';
import { ID_PATTERN, READABLE_CONVERSATION_ID_PATTERN } from '../domain/limits';
import { BudgetsSchema } from '../domain/spend';
import { DeliveryShown } from './delivery-shown';
import { storableString } from '../domain/text';

/** Shapes of the REST contract (API.md) that are not rules of the domain itself. */
export const Id = z.string().regex(ID_PATTERN, '1–128 characters of [A-Za-z0-9._-]');

/**
 * A whole number in a query string or a path, from `min` to `max`. An empty value (`?afterSeq=`) is refused, where
 * z.coerce alone would read it as 0 (Number('') is 0). OpenAPI shows an integer.
 */
export const wholeNumber = (min: number, max: number) =>
  z.preprocess(
    (v) => (v === '' ? Number.NaN : v),
    z.coerce.number({ error: 'expected a whole number' }).int('expected a whole number').min(min).max(max),
  );
/**
 * A date-time in a query string or a body (OpenAPI: `format: date-time`): RFC 3339 with any offset, given on in UTC
 * as PostgreSQL reads it. Its home is domain/text.ts, since a job's `at` (domain/jobs.ts) is one too.
 */
export { dateTime } from '../domain/text';
export const AgentParams = z.object({ agentId: Id });
export const ConversationParams = z.object({ agentId: Id, conversationId: Id });
/** A conversation to read, which may be one Keel runs for a job or a routine (`sched:…`, `routine:…:…`). */
export const ReadableConversationParams = z.object({
  agentId: Id,
  conversationId: z
    .string()
    .regex(READABLE_CONVERSATION_ID_PATTERN, "an id of [A-Za-z0-9._-], or Keel's own sched:… or routine:…:…"),
});

export const ErrorResponse = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }),
});

export const AgentBody = z
  .object({
    name: storableString().min(1).max(200),
    model: storableString().min(1).max(200).optional(),
    systemPrompt: storableString().max(100_000).optional(),
    owner: z.object({ delivery: Delivery }).strict().optional(),
    /** Where the agent's model may send, by name: the model names one, never writes a URL or a Slack target. */
    destinations: Destinations.optional(),
    reflection: z.object({ enabled: z.boolean() }).strict().optional(),
    /** Spending limits in USD, checked before every model call (docs/spend.md); none when absent. */
    budgets: BudgetsSchema.optional(),
  })
  .strict();

export const Agent = z.object({
  agentId: z.string(),
  name: z.string(),
  model: z.string().nullable(),
  systemPrompt: z.string().nullable(),
  owner: z.object({ delivery: DeliveryShown }).nullable(),
  destinations: z.record(z.string(), DeliveryShown),
  reflection: z.object({ enabled: z.boolean() }),
  budgets: BudgetsSchema,
  createdAt: z.string(),
  updatedAt: z.string(),
});

/** Runs whose workflow task keeps failing (GET …/failing-runs): the console warns of each. */
export const FailingRuns = z.object({
  runs: z.array(
    z.object({
      runId: z.string(),
      workflowId: z.string(),
      workflowType: z.string(),
      agentId: z.string().nullable(),
      cause: z.enum(['nondeterminism', 'error']),
      /** Failed tasks the workers reported. */
      failures: z.number().int(),
      /** Temporal's attempt count of its pending workflow task. */
      attempt: z.number().int(),
      lastMessage: z.string(),
      lastAt: z.string(),
    }),
  ),
});

export const SubmitQuery = z.object({ wait: wholeNumber(0, 120).default(0) }).strict();

export const SubmitResponse = z.object({
  messageId: z.string(),
  turnId: z.string(),
  status: z.enum(['accepted', 'queued', 'replied', 'skipped', 'error', 'interrupted', 'budget_exhausted']),
  reply: z
    .object({ text: z.string(), delivery: z.object({ outcome: z.string().nullable(), attempts: z.number() }) })
    .optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});

export const TranscriptQuery = z
  .object({
    afterSeq: wholeNumber(0, 2_147_483_647).default(0),
    limit: wholeNumber(1, 1000).default(100),
  })
  .strict();

export const ConversationView = z.object({
  conversationId: z.string(),
  state: z.object({ busy: z.boolean(), queued: z.number(), liveDelegates: z.array(z.string()) }),
  messages: z.array(
    z.object({
      seq: z.number(),
      role: z.enum(['user', 'assistant', 'system', 'tool']),
      text: z.string(),
      at: z.string(),
      turnId: z.string().nullable(),
      toolCalls: z
        .array(
          z.object({
            toolUseId: z.string(),
            name: z.string().nullable().describe('The name the model called; null when its step is on another page'),
            arguments: z.record(z.string(), z.unknown()).nullable(),
            result: z.string().describe('The result as the transcript keeps it (a preview of a large one)'),
            isError: z.boolean(),
            server: z
              .object({
                id: z.string().describe("The tool call's id (GET …/tool-calls/:callId)"),
                server: z.string(),
                tool: z.string(),
                policy: z.enum(['auto', 'approve', 'deny']),
                status: z.string(),
                decidedBy: z.string().nullable(),
                note: z.string().nullable(),
                durationMs: z.number().nullable(),
              })
              .optional()
              .describe("A tool server's tool: its policy, a person's decision, and how long it took"),
          }),
        )
        .optional()
        .describe('On tool rows: each tool call the row answers'),
    }),
  ),
});
