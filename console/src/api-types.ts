import type { paths } from './api-schema.gen';

/**
 * The API's shapes the console's views name, each taken from the generated OpenAPI types (api-schema.gen.ts, `npm
 * run api-types`): none is written here by hand, so a route's schema that changes fails the console's type check.
 */

// A route without the JSON asked for gives unknown, not never: what is taken from it then fails to type-check.
type Json<R> = R extends { content: { 'application/json': infer Body } } ? Body : unknown;
/** The JSON that `GET path` answers with 200. */
type Read<P extends keyof paths> = paths[P] extends { get: { responses: { 200: infer R } } } ? Json<R> : unknown;
/** The JSON body `POST path` is sent with. */
type Sent<P extends keyof paths> = paths[P] extends { post: { requestBody?: infer B } } ? Json<B> : unknown;

/** An agent as the list of agents shows it: its counts and last activity. */
export type AgentSummary = Read<'/v1/agents'>['items'][number];
/** A deletion of an agent or of one of its conversations, and how it goes. */
export type Deletion = Read<'/v1/agents/{agentId}/deletions/{deletionId}'>;
export type AuditEntry = Read<'/v1/agents/{agentId}/audit'>['entries'][number];

export type Approval = Read<'/v1/approvals'>['items'][number];
export type ProposalApproval = Extract<Approval, { kind: 'proposal' }>;
export type ToolCallApproval = Extract<Approval, { kind: 'tool_call' }>;
/** Where a gated routine run would send: a delivery, shown without its secret. */
export type Delivery = NonNullable<Extract<Approval, { kind: 'routine_run' }>['gate']['target']>;

export type ConversationView = Read<'/v1/agents/{agentId}/conversations/{conversationId}'>;
export type TranscriptMessage = ConversationView['messages'][number];
export type TranscriptToolCall = NonNullable<TranscriptMessage['toolCalls']>[number];

export type Delegate = Read<'/v1/agents/{agentId}/delegates/{delegateId}'>;
export type DelegateFilter = NonNullable<
  NonNullable<paths['/v1/agents/{agentId}/delegates']['get']['parameters']['query']>['status']
>;

/** A job's schedule, as a job is created with it: the API answers it back as it was stored. */
export type JobSchedule = Sent<'/v1/agents/{agentId}/jobs'>['schedule'];
// The job's answer declares its schedule as unknown (api/routes/jobs.ts): it is the schedule the job was created with.
export type Job = Omit<Read<'/v1/agents/{agentId}/jobs/{id}'>, 'schedule'> & { schedule: JobSchedule };

export type JobRun = Read<'/v1/agents/{agentId}/jobs/{id}/runs'>[number];

export type Routine = Read<'/v1/agents/{agentId}/apps/{appId}/routines/{slug}'>;

export type MemoryVersion = Read<'/v1/agents/{agentId}/memory/versions'>[number];
export type ReflectionState = Read<'/v1/agents/{agentId}/reflection'>;

export type UsageGroupBy = NonNullable<
  NonNullable<paths['/v1/agents/{agentId}/usage']['get']['parameters']['query']>['groupBy']
>;
export type Usage = Read<'/v1/agents/{agentId}/usage'>;
export type Budget = Read<'/v1/agents/{agentId}/budgets'>['budgets'][number];

export type FailingRun = Read<'/v1/agents/{agentId}/failing-runs'>['runs'][number];

export type ToolServer = Read<'/v1/agents/{agentId}/tool-servers'>['items'][number];
export type ServerTool = ToolServer['tools'][number];
export type ToolPolicy = ServerTool['policy'];

export type EvalHead = Read<'/v1/agents/{agentId}/evals'>['items'][number];
export type Evaluation = Read<'/v1/agents/{agentId}/evals/{evalId}'>;
export type EvalCase = Evaluation['cases'][number];
export type EvalCaseResult = NonNullable<EvalCase['result']>;
export type Divergence = NonNullable<EvalCaseResult['firstDivergence']>;
/** What an evaluation is started with; its candidate, an overlay of the agent's configuration. */
export type EvalRequest = Sent<'/v1/agents/{agentId}/evals'>;
export type Candidate = NonNullable<EvalRequest['candidate']>;
export type EvalCaseDetail = Read<'/v1/agents/{agentId}/evals/{evalId}/cases/{caseId}'>;
export type EvalTurn = EvalCaseDetail['turns'][number];
export type RecordedTurn = NonNullable<EvalTurn['recorded']>;
export type CandidateTurn = NonNullable<EvalTurn['candidate']>;
/** A transcript row as a case keeps it: its role and content blocks (text, tool_use, tool_result). */
export type EvalRow = RecordedTurn['rows'][number];
export type EvalBlock = EvalRow['content'][number];
export type EvalToolCall = CandidateTurn['toolCalls'][number];

export type Fork = Read<'/v1/agents/{agentId}/conversations/{conversationId}/fork'>;
