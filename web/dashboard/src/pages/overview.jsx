// "#/": the cluster's numbers (GET /overview) and every job (GET /jobs/overview).
import { get } from '../api.js';
import { Card, ErrorBox, Loading, StateBadge } from '../components.jsx';
import { DASH, fmtDuration, fmtTime, liveDuration } from '../format.js';
import { useNow, usePoll } from '../hooks.js';

const TASK_STATES = [
  ['running', 'running'],
  ['finished', 'finished'],
  ['canceled', 'canceled'],
  ['failed', 'failed'],
  ['canceling', 'failing'],
  ['deploying', 'pending'],
  ['scheduled', 'pending'],
  ['created', 'pending'],
  ['initializing', 'pending'],
  ['reconciling', 'pending'],
];

// Task counts by state ("tasks" of /jobs/overview or a vertex), non-zero ones.
export function TaskCounts({ tasks }) {
  if (!tasks) return DASH;
  return (
    <span class="task-counts">
      {TASK_STATES.filter(([k]) => tasks[k] > 0).map(([k, cls]) => (
        <span key={k} class={`count state-${cls}`} title={`${tasks[k]} ${k}`}>
          {tasks[k]}
        </span>
      ))}
      <span class="muted"> / {tasks.total ?? DASH}</span>
    </span>
  );
}

export function OverviewPage() {
  const now = useNow();
  const overview = usePoll(() => get('/overview'), []);
  const jobs = usePoll(() => get('/jobs/overview'), []);
  const o = overview.data || {};
  const list = [...(jobs.data?.jobs || [])].sort(
    (a, b) => (b['start-time'] || 0) - (a['start-time'] || 0)
  );
  return (
    <div>
      <h2>Overview</h2>
      <ErrorBox error={overview.error} what="Cluster overview" />
      <div class="cards">
        <Card label="TaskManagers" value={o.taskmanagers} field="taskmanagers" />
        <Card label="Task slots" value={o['slots-total']} field="slots-total" />
        <Card label="Available slots" value={o['slots-available']} field="slots-available" />
        <Card label="Running jobs" value={o['jobs-running']} field="jobs-running" />
        <Card label="Finished jobs" value={o['jobs-finished']} field="jobs-finished" />
        <Card label="Cancelled jobs" value={o['jobs-cancelled']} field="jobs-cancelled" />
        <Card label="Failed jobs" value={o['jobs-failed']} field="jobs-failed" />
      </div>
      <h2>Jobs</h2>
      <ErrorBox error={jobs.error} what="Job list" />
      {!jobs.loaded ? (
        <Loading />
      ) : list.length === 0 ? (
        <div class="muted">No jobs.</div>
      ) : (
        <table class="grid" data-field="job-list">
          <thead>
            <tr>
              <th>Job name</th>
              <th>Start time</th>
              <th>Duration</th>
              <th>End time</th>
              <th>Tasks</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {list.map((j) => (
              <tr
                key={j.jid}
                data-job-id={j.jid}
                class="clickable"
                onClick={() => (location.hash = `#/jobs/${j.jid}`)}
              >
                <td>
                  <a href={`#/jobs/${j.jid}`}>{j.name || j.jid}</a>
                  <div class="muted small mono">{j.jid}</div>
                </td>
                <td class="nowrap">{fmtTime(j['start-time'])}</td>
                <td>{fmtDuration(liveDuration(j['start-time'], j['end-time'], j.duration, now))}</td>
                <td class="nowrap">{fmtTime(j['end-time'])}</td>
                <td>
                  <TaskCounts tasks={j.tasks} />
                </td>
                <td>
                  <StateBadge state={j.state} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
