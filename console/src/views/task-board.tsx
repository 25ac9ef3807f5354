import type { Task } from '../api-types';
import { apiPath, getPage } from '../api';
import { ErrorAlert } from '../error-alert';
import { TableWrap } from '../table-wrap';
import { LoadMore } from '../load-more';
import { instant } from '../time';
import { usePagedList } from '../use-paged-list';

/** The agent's task board: each task's number, title, status and skills. */
export function TaskBoard({ agentId }: { agentId: string }) {
  const list = usePagedList<Task>(`tasks:${agentId}`, (cursor, signal) =>
    getPage(apiPath('agents', agentId, 'tasks'), { limit: 100 }, cursor, signal),
  );
  return (
    <section aria-labelledby="task-board-heading">
      <h3 id="task-board-heading">Task board</h3>
      <ErrorAlert error={list.error} />
      {list.items.length === 0 && !list.loading && !list.error ? <p className="notice">No tasks.</p> : null}
      {list.items.length ? (
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
              {list.items.map((t) => (
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
