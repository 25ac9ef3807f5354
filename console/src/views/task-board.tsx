import { useInfiniteQuery } from '@tanstack/react-query';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { TableWrap } from '../table-wrap';
import { LoadMore } from '../load-more';
import { pagedQuery } from '../paged-query';
import { instant } from '../time';

/** The agent's task board: each task's number, title, status and skills. */
export function TaskBoard({ agentId }: { agentId: string }) {
  const list = useInfiniteQuery(
    pagedQuery(['agents', agentId, 'tasks'], (cursor, signal) =>
      answer(
        api.GET('/v1/agents/{agentId}/tasks', { params: { path: { agentId }, query: { limit: 100, cursor } }, signal }),
      ),
    ),
  );
  const items = list.data ?? [];
  return (
    <section aria-labelledby="task-board-heading">
      <h3 id="task-board-heading">Task board</h3>
      <ErrorAlert error={list.error} />
      {items.length === 0 && list.isSuccess ? <p className="notice">No tasks.</p> : null}
      {items.length ? (
        <TableWrap label="Task board table">
          <table>
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Title</th>
                <th scope="col">Status</th>
                <th scope="col">Skills</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {items.map((t) => (
                <tr key={t.number}>
                  <td>{t.number}</td>
                  <td className="text">{t.title}</td>
                  <td>{t.status}</td>
                  <td>{t.requiredSkills.join(', ') || '—'}</td>
                  <td>{instant(t.updatedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <LoadMore list={list} />
    </section>
  );
}
