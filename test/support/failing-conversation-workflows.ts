// Keel's workflows, but a conversation whose every workflow task fails (a test-only fault): what a job's run meets
// when its conversation is stuck, as a nondeterminism error left it in issue 24 (test/job-turn-deadline.test.ts).
export * from '../../workflows';

export async function conversationWorkflow(): Promise<void> {
  throw new TypeError('test fault: every workflow task of this conversation fails');
}
