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

/**
 * The view a route names, for `agentId`: the route's agent, or the tab's in the places of every agent. A conversation
 * or an evaluation with no agent chosen shows its list, which asks for one.
 */
export function CurrentView({ route, ...props }: ViewProps & { route: Route }) {
  switch (route.view) {
    case 'agents':
      return <AgentsView {...props} />;
    case 'inbox':
      return <ApprovalsView {...props} everyAgent />;
    case 'approvals':
      return <ApprovalsView {...props} everyAgent={false} />;
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
