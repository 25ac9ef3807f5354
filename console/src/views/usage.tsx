import { useQuery, useQueryClient } from '@tanstack/react-query';
import type { Budget, Usage, UsageGroupBy } from '../api-types';
import { answer, api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { href } from '../routes';
import { ErrorAlert } from '../error-alert';
import { TableWrap } from '../table-wrap';
import type { ViewProps } from '../view-props';

/** The budgets' names as docs/spend.md says them. */
const BUDGET_NAMES: Record<Budget['name'], string> = {
  dailyUsd: 'Daily',
  monthlyUsd: 'Monthly',
  perTurnUsd: 'Per turn',
  perDelegateTreeUsd: 'Per delegate tree',
  perJobRunUsd: 'Per job run',
  perRoutineRunUsd: 'Per routine run',
};

const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: 4 });
const count = new Intl.NumberFormat('en-US');

/** What the agent's model calls cost this month, per day and per conversation, and where its budgets stand. */
export function UsageView({ agentId, headingRef }: ViewProps) {
  const byDay = useUsage(agentId, 'day');
  const byConversation = useUsage(agentId, 'conversation');
  const budgets = useQuery({
    queryKey: ['agents', agentId, 'budgets'],
    queryFn: ({ signal }) => answer(api.GET('/v1/agents/{agentId}/budgets', { params: { path: { agentId } }, signal })),
    enabled: agentId !== '',
  });
  const queryClient = useQueryClient();
  const refresh = () =>
    ['usage', 'budgets'].forEach((what) => void queryClient.invalidateQueries({ queryKey: ['agents', agentId, what] }));
  return (
    <section aria-labelledby="view-heading">
      <div className="view-head">
        <h2 id="view-heading" ref={headingRef} tabIndex={-1}>
          Usage and budgets
        </h2>
        {agentId ? (
          <button type="button" className="button" onClick={refresh}>
            Refresh
          </button>
        ) : null}
      </div>
      {!agentId ? (
        <AgentNeeded what="spending and budgets" />
      ) : (
        <>
          <section aria-labelledby="budgets-heading">
            <h3 id="budgets-heading">Budgets</h3>
            <ErrorAlert error={budgets.error} />
            {budgets.data?.budgets.length === 0 ? <p className="notice">No budgets set for this agent.</p> : null}
            {budgets.data?.budgets.length ? (
              <TableWrap label="Budgets table">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Budget</th>
                      <th scope="col">Counts</th>
                      <th scope="col">Limit</th>
                      <th scope="col">Spent</th>
                      <th scope="col">Reserved</th>
                      <th scope="col">Left</th>
                    </tr>
                  </thead>
                  <tbody>
                    {budgets.data.budgets.map((b) => (
                      <tr key={b.name}>
                        <th scope="row">
                          {BUDGET_NAMES[b.name] ?? b.name} <code>{b.name}</code>
                        </th>
                        <td>{b.counts}</td>
                        <td className="num">{usd.format(b.limitUsd)}</td>
                        <td className="num">{b.spentUsd === undefined ? '—' : usd.format(b.spentUsd)}</td>
                        <td className="num">{b.reservedUsd === undefined ? '—' : usd.format(b.reservedUsd)}</td>
                        <td className="num">{b.leftUsd === undefined ? '—' : usd.format(b.leftUsd)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            ) : null}
          </section>
          <UsageTable title="Spend per day" keyName="Day" usage={byDay.data} error={byDay.error} />
          <UsageTable
            title="Spend per conversation"
            keyName="Conversation"
            usage={byConversation.data}
            error={byConversation.error}
            link={(key) => conversationOf(agentId, key)}
          />
        </>
      )}
    </section>
  );
}

/** What the agent's model calls cost this month, grouped by `groupBy`. */
function useUsage(agentId: string, groupBy: UsageGroupBy) {
  return useQuery({
    queryKey: ['agents', agentId, 'usage', groupBy],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/usage', { params: { path: { agentId }, query: { groupBy } }, signal })),
    enabled: agentId !== '',
  });
}

/** A conversation key of this agent (`conv:<agentId>:<conversationId>`) as a link to the conversation. */
function conversationOf(agentId: string, key: string): string | null {
  const prefix = `conv:${agentId}:`;
  return key.startsWith(prefix)
    ? href({ view: 'conversation', agentId, conversationId: key.slice(prefix.length) })
    : null;
}

function UsageTable(props: {
  title: string;
  keyName: string;
  usage: Usage | undefined;
  error: unknown;
  link?: (key: string) => string | null;
}) {
  const { usage } = props;
  const row = (g: Usage['total']) => (
    <>
      <td className="num">{count.format(g.calls)}</td>
      <td className="num">{count.format(g.inputTokens)}</td>
      <td className="num">{count.format(g.outputTokens)}</td>
      <td className="num">{count.format(g.cacheReadTokens + g.cacheWriteTokens)}</td>
      <td className="num">{usd.format(g.costUsd)}</td>
    </>
  );
  return (
    <section aria-label={props.title}>
      <h3>{props.title}</h3>
      <ErrorAlert error={props.error} />
      {usage ? (
        <p className="meta">
          From {usage.from.slice(0, 10)} to {usage.to.slice(0, 10)} (UTC)
        </p>
      ) : null}
      {usage?.groups.length === 0 ? <p className="notice">No model calls in this range.</p> : null}
      {usage?.groups.length ? (
        <TableWrap label={`${props.title} table`}>
          <table>
            <thead>
              <tr>
                <th scope="col">{props.keyName}</th>
                <th scope="col">Calls</th>
                <th scope="col">Input tokens</th>
                <th scope="col">Output tokens</th>
                <th scope="col">Cache tokens</th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {usage.groups.map((g) => (
                <tr key={g.key ?? '(none)'}>
                  <th scope="row">
                    <GroupKey value={g.key} link={props.link} />
                  </th>
                  {row(g)}
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">Total</th>
                {row(usage.total)}
              </tr>
            </tfoot>
          </table>
        </TableWrap>
      ) : null}
    </section>
  );
}

function GroupKey({ value, link }: { value: string | null; link?: (key: string) => string | null }) {
  if (value === null) return <>(none)</>;
  const to = link?.(value);
  return to ? <a href={to}>{value}</a> : <>{value}</>;
}
