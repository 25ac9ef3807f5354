import type { Route } from './routes';
import type { ViewProps } from './view-props';
import { AgentsView } from './views/agents';
import { ApprovalsView } from './views/approvals';
import { AuditView } from './views/audit';
import { ConversationDetail } from './views/conversation';
import { ConversationsView } from './views/conversations';
import { DelegatesView } from './views/delegates';
import { EvalCaseView } from './views/eval-case';
import { EvalDetail } from './views/eval-detail';
import { EvalsView } from './views/evals';
import { JobsAndRoutinesView } from './views/jobs-and-routines';
import { MemoryView } from './views/memory';
import { ToolsView } from './views/tools';
import { UsageView } from './views/usage';

/** The view a route names; the agents' list chooses the agent with `onChooseAgent`. */
export function CurrentView({
  route,
  onChooseAgent,
  ...props
}: ViewProps & { route: Route; onChooseAgent: (agentId: string) => void }) {
  switch (route.view) {
    case 'agents':
      return <AgentsView {...props} onChoose={onChooseAgent} />;
    case 'approvals':
      return <ApprovalsView {...props} />;
    case 'audit':
      return <AuditView {...props} />;
    case 'conversations':
      return <ConversationsView {...props} />;
    case 'conversation':
      return props.agentId ? (
        // Each conversation a view of its own: what one followed live is never shown under another.
        <ConversationDetail
          key={`${props.agentId}\n${route.conversationId}`}
          {...props}
          conversationId={route.conversationId}
        />
      ) : (
        <ConversationsView {...props} />
      );
    case 'delegates':
      return <DelegatesView {...props} />;
    case 'evals':
      return <EvalsView {...props} />;
    case 'eval':
      return props.agentId ? <EvalDetail {...props} evalId={route.evalId} /> : <EvalsView {...props} />;
    case 'eval-case':
      return props.agentId ? (
        <EvalCaseView {...props} evalId={route.evalId} caseId={route.caseId} />
      ) : (
        <EvalsView {...props} />
      );
    case 'jobs':
      return <JobsAndRoutinesView {...props} />;
    case 'memory':
      return <MemoryView {...props} />;
    case 'tools':
      return <ToolsView {...props} />;
    case 'usage':
      return <UsageView {...props} />;
  }
}
