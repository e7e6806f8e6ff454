// "#/jobs/<jid>[/<tab>]": one job: its header with Cancel and Savepoint, the
// job graph, and tabs for the selected vertex, checkpoints, exceptions and
// the job's metrics.
import { useEffect, useState } from 'preact/hooks';
import { get, mutate, webCancelEnabled } from '../api.js';
import { ErrorBox, Loading, StateBadge, TERMINAL_STATES } from '../components.jsx';
import {
  DASH,
  fmtBytes,
  fmtCount,
  fmtDuration,
  fmtPercent,
  fmtTime,
  fmtWatermark,
  isNum,
  liveDuration,
  num,
} from '../format.js';
import { useNow, usePoll } from '../hooks.js';
import { CheckpointsTab } from './checkpoints.jsx';
import { JobGraph, loadLive } from './job_graph.jsx';
import { TaskCounts } from './overview.jsx';

const TABS = [
  ['', 'Vertex'],
  ['checkpoints', 'Checkpoints'],
  ['exceptions', 'Exceptions'],
  ['metrics', 'Metrics'],
];

// --- actions -------------------------------------------------------------------

function CancelButton({ jid, disabled }) {
  const [phase, setPhase] = useState('idle'); // idle, confirm, sending, sent
  const [error, setError] = useState(null);
  const send = async () => {
    setPhase('sending');
    setError(null);
    try {
      await mutate('PATCH', `/jobs/${jid}?mode=cancel`);
      setPhase('sent');
    } catch (e) {
      setError(e);
      setPhase('idle');
    }
  };
  return (
    <span class="action">
      {phase === 'confirm' ? (
        <>
          <span>Cancel this job?</span>
          <button class="danger" data-action="cancel-confirm" onClick={send}>
            Yes, cancel
          </button>
          <button onClick={() => setPhase('idle')}>No</button>
        </>
      ) : (
        <button
          class="danger"
          data-action="cancel"
          disabled={disabled || phase === 'sending' || phase === 'sent'}
          onClick={() => setPhase('confirm')}
        >
          {phase === 'sent' ? 'Cancellation requested' : phase === 'sending' ? 'Cancelling\u2026' : 'Cancel job'}
        </button>
      )}
      {error ? <span class="error-inline">{error.message}</span> : null}
    </span>
  );
}

// One triggered savepoint, polled until it completes.
function SavepointStatus({ jid, request }) {
  const [state, setState] = useState({ status: 'IN_PROGRESS' });
  useEffect(() => {
    let stopped = false;
    let timer = 0;
    const tick = async () => {
      try {
        const r = await get(`/jobs/${jid}/savepoints/${request}`);
        if (stopped) return;
        const status = r.status?.id || 'IN_PROGRESS';
        const op = r.operation || {};
        const cause = op['failure-cause'];
        const failure = cause
          ? String(cause['stack-trace'] || cause.class || 'failed').split('\n')[0]
          : null;
        setState({ status, location: op.location, failure });
        if (status === 'COMPLETED') return;
      } catch (e) {
        if (stopped) return;
        setState((s) => ({ ...s, error: e.message }));
        if (e.status === 404) return;
      }
      timer = setTimeout(tick, 1000);
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [jid, request]);
  const done = state.status === 'COMPLETED';
  return (
    <div class="savepoint" data-savepoint-request={request} data-status={done ? (state.failure ? 'FAILED' : 'COMPLETED') : 'IN_PROGRESS'}>
      <span title={`request ${request}`}>Savepoint</span>{' '}
      {!done ? (
        <span class="muted">in progress{'\u2026'}</span>
      ) : state.failure ? (
        <span class="error-inline">failed: {state.failure}</span>
      ) : (
        <span>
          completed: <span class="mono" data-field="savepoint-location">{state.location || DASH}</span>
        </span>
      )}
      {state.error ? <span class="error-inline"> {state.error}</span> : null}
    </div>
  );
}

function SavepointAction({ jid, disabled }) {
  const [open, setOpen] = useState(false);
  const [dir, setDir] = useState('');
  const [requests, setRequests] = useState([]);
  const [error, setError] = useState(null);
  const [sending, setSending] = useState(false);
  const trigger = async (e) => {
    e.preventDefault();
    setSending(true);
    setError(null);
    try {
      const body = { 'cancel-job': false };
      if (dir.trim()) body['target-directory'] = dir.trim();
      const r = await mutate('POST', `/jobs/${jid}/savepoints`, body);
      if (r['request-id']) setRequests((l) => [r['request-id'], ...l]);
      setOpen(false);
    } catch (err) {
      setError(err);
    }
    setSending(false);
  };
  return (
    <span class="action">
      {open ? (
        <form class="inline-form" onSubmit={trigger}>
          <input
            name="target-directory"
            placeholder="target directory (optional)"
            value={dir}
            onInput={(e) => setDir(e.currentTarget.value)}
          />
          <button type="submit" class="primary" data-action="savepoint-trigger" disabled={sending}>
            Trigger
          </button>
          <button type="button" onClick={() => setOpen(false)}>
            Close
          </button>
        </form>
      ) : (
        <button data-action="savepoint" disabled={disabled} onClick={() => setOpen(true)}>
          Savepoint
        </button>
      )}
      {error ? <span class="error-inline">{error.message}</span> : null}
      {requests.length ? (
        <div class="savepoints">
          {requests.map((r) => (
            <SavepointStatus key={r} jid={jid} request={r} />
          ))}
        </div>
      ) : null}
    </span>
  );
}

// --- the selected vertex ---------------------------------------------------------

function VertexTab({ jid, vid, live }) {
  const now = useNow();
  const detail = usePoll(() => get(`/jobs/${jid}/vertices/${vid}`), [jid, vid]);
  const marks = usePoll(() => get(`/jobs/${jid}/vertices/${vid}/watermarks`), [jid, vid]);
  if (!vid) return <div class="muted">Select a vertex in the graph.</div>;
  const v = detail.data;
  const bpSubtasks = {};
  for (const s of live?.backpressure?.subtasks || []) bpSubtasks[s.subtask] = s;
  const watermarks = (Array.isArray(marks.data) ? marks.data : []).map((w) => {
    const dot = String(w.id).indexOf('.');
    return { subtask: dot > 0 ? w.id.slice(0, dot) : DASH, name: dot > 0 ? w.id.slice(dot + 1) : w.id, value: w.value };
  });
  return (
    <div data-field="vertex-details" data-selected-vertex-id={vid}>
      <ErrorBox error={detail.error} what="Vertex" />
      {!v ? (
        detail.loaded ? null : <Loading />
      ) : (
        <>
          <h3>
            {v.name} <span class="muted small mono">{v.id}</span>
          </h3>
          <div class="muted">
            Parallelism {v.parallelism} · max parallelism {v.maxParallelism ?? DASH}
            {live ? (
              <>
                {' '}
                · busy (max) {fmtPercent(live.busy)} · backpressured (max) {fmtPercent(live.backPressured)} · idle
                (max) {fmtPercent(live.idle)}
              </>
            ) : null}
          </div>
          <table class="grid" data-field="subtasks">
            <thead>
              <tr>
                <th>Subtask</th>
                <th>Status</th>
                <th>Attempt</th>
                <th>Host</th>
                <th>TaskManager</th>
                <th>Start time</th>
                <th>Duration</th>
                <th>Records received</th>
                <th>Records sent</th>
                <th>Bytes received</th>
                <th>Bytes sent</th>
                <th>Backpressure</th>
                <th>Busy</th>
              </tr>
            </thead>
            <tbody>
              {(v.subtasks || []).map((s) => {
                const m = s.metrics || {};
                const bp = bpSubtasks[s.subtask];
                return (
                  <tr key={s.subtask} data-subtask={s.subtask}>
                    <td>{s.subtask}</td>
                    <td>
                      <StateBadge state={s.status} />
                    </td>
                    <td>{s.attempt ?? DASH}</td>
                    <td>{s.endpoint || s.host || DASH}</td>
                    <td>
                      {s['taskmanager-id'] ? (
                        <a href={`#/taskmanagers/${encodeURIComponent(s['taskmanager-id'])}`} class="mono small">
                          {s['taskmanager-id']}
                        </a>
                      ) : (
                        DASH
                      )}
                    </td>
                    <td class="nowrap">{fmtTime(s['start-time'] ?? s.start_time)}</td>
                    <td>{fmtDuration(liveDuration(s['start-time'] ?? s.start_time, s['end-time'], s.duration, now))}</td>
                    <td>{fmtCount(m['read-records'])}</td>
                    <td>{fmtCount(m['write-records'])}</td>
                    <td>{fmtBytes(m['read-bytes'])}</td>
                    <td>{fmtBytes(m['write-bytes'])}</td>
                    <td>
                      {bp ? `${String(bp['backpressure-level'] || DASH).toUpperCase()} (${fmtPercent(num(bp.ratio) * 100)})` : DASH}
                    </td>
                    <td>{bp && isNum(num(bp.busyRatio)) ? fmtPercent(num(bp.busyRatio) * 100) : DASH}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </>
      )}
      <h3>Watermarks</h3>
      {watermarks.length === 0 ? (
        <div class="muted">{marks.error ? marks.error.message : 'No watermarks reported.'}</div>
      ) : (
        <table class="grid narrow" data-field="watermarks">
          <thead>
            <tr>
              <th>Subtask</th>
              <th>Metric</th>
              <th>Watermark</th>
            </tr>
          </thead>
          <tbody>
            {watermarks.map((w) => (
              <tr key={`${w.subtask}.${w.name}`} data-subtask={w.subtask}>
                <td>{w.subtask}</td>
                <td>{w.name}</td>
                <td data-value={w.value}>{fmtWatermark(w.value)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

// --- exceptions --------------------------------------------------------------

function ExceptionsTab({ jid }) {
  const ex = usePoll(() => get(`/jobs/${jid}/exceptions`), [jid]);
  if (!ex.loaded) return <Loading />;
  const d = ex.data || {};
  const entries = d.exceptionHistory?.entries || [];
  return (
    <div data-field="exceptions">
      <ErrorBox error={ex.error} what="Exceptions" />
      {d['root-exception'] ? (
        <div class="root-exception">
          <h3>Root exception {d.timestamp ? <span class="muted small">{fmtTime(d.timestamp)}</span> : null}</h3>
          <pre>{d['root-exception']}</pre>
        </div>
      ) : null}
      {entries.length === 0 ? (
        <div class="muted">No exceptions.</div>
      ) : (
        <table class="grid" data-field="exception-history">
          <thead>
            <tr>
              <th>Time</th>
              <th>Exception</th>
              <th>Task</th>
              <th>Location</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e, i) => {
              const text = String(e.stacktrace || '');
              const first = text.split('\n')[0];
              return (
                <tr key={i} data-exception-index={i}>
                  <td class="nowrap">{fmtTime(e.timestamp)}</td>
                  <td>
                    <div class="mono small">{e.exceptionName}</div>
                    {text.includes('\n') ? (
                      <details>
                        <summary>{first}</summary>
                        <pre>{text}</pre>
                      </details>
                    ) : (
                      <div>{first}</div>
                    )}
                    {(e.concurrentExceptions || []).length ? (
                      <div class="muted small">{e.concurrentExceptions.length} concurrent exception(s)</div>
                    ) : null}
                  </td>
                  <td>{e.taskName || '(job)'}</td>
                  <td>{e.endpoint || e.location || DASH}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {d.exceptionHistory?.truncated ? <div class="muted">Older exceptions were left out.</div> : null}
    </div>
  );
}

// --- job metrics -------------------------------------------------------------

const JOB_METRICS = [
  ['uptime', 'Uptime', (v) => fmtDuration(v)],
  ['numRestarts', 'Restarts', (v) => fmtCount(v)],
  ['lastCheckpointDuration', 'Last checkpoint duration', (v) => fmtDuration(v)],
  ['lastCheckpointSize', 'Last checkpoint size', (v) => fmtBytes(v)],
  ['numberOfCompletedCheckpoints', 'Completed checkpoints', (v) => fmtCount(v)],
  ['numberOfFailedCheckpoints', 'Failed checkpoints', (v) => fmtCount(v)],
  ['lastCheckpointRestoreTimestamp', 'Last restore', (v) => (num(v) > 0 ? fmtTime(v) : 'never')],
];

function MetricsTab({ jid }) {
  const metrics = usePoll(
    () => get(`/jobs/${jid}/metrics?get=${JOB_METRICS.map(([id]) => id).join(',')}`),
    [jid]
  );
  if (!metrics.loaded) return <Loading />;
  const values = {};
  for (const m of Array.isArray(metrics.data) ? metrics.data : []) values[m.id] = m.value;
  return (
    <div data-field="job-metrics">
      <ErrorBox error={metrics.error} what="Job metrics" />
      <table class="grid narrow">
        <thead>
          <tr>
            <th>Metric</th>
            <th>Value</th>
            <th>Name</th>
          </tr>
        </thead>
        <tbody>
          {JOB_METRICS.map(([id, label, f]) => (
            <tr key={id} data-metric={id}>
              <td>{label}</td>
              <td data-value={values[id]}>{values[id] === undefined ? DASH : f(values[id])}</td>
              <td class="mono small muted">{id}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

// --- the page ------------------------------------------------------------------

export function JobPage({ jid, tab }) {
  const now = useNow();
  const job = usePoll(() => get(`/jobs/${jid}`), [jid]);
  const j = job.data;
  const vertexIds = (j?.vertices || []).map((v) => v.id);
  const terminal = j && TERMINAL_STATES.has(j.state);
  // Metrics of a job that has ended no longer change: fetch them once more
  // when it ends, then hardly again.
  const live = usePoll(() => loadLive(jid, vertexIds), [jid, vertexIds.join(','), terminal], {
    intervalMs: terminal ? 3600 * 1000 : undefined,
    keep: true,
  });
  const [selected, setSelected] = useState(null);
  const vid = selected && vertexIds.includes(selected) ? selected : vertexIds[0];

  if (!j) {
    if (job.error) {
      return (
        <div>
          <p>
            <a href="#/">{'\u2190'} Jobs</a>
          </p>
          <ErrorBox error={job.error} what={job.error.status === 404 ? 'Not found' : `Job ${jid}`} />
        </div>
      );
    }
    return <Loading />;
  }
  const current = TABS.find(([t]) => t === (tab || '')) ? tab || '' : '';
  return (
    <div data-job-id={jid}>
      <p class="crumbs">
        <a href="#/">Jobs</a> / {j.name}
      </p>
      <div class="job-header">
        <div>
          <h2>
            {j.name} <StateBadge state={j.state} />
          </h2>
          <div class="muted small mono">{j.jid}</div>
          <div class="job-facts">
            <span>Start {fmtTime(j['start-time'])}</span>
            {num(j['end-time']) > 0 ? <span>End {fmtTime(j['end-time'])}</span> : null}
            <span data-field="duration">
              Duration {fmtDuration(liveDuration(j['start-time'], j['end-time'], j.duration, now))}
            </span>
            <span>
              Vertices <TaskCounts tasks={j['status-counts'] ? { ...lower(j['status-counts']), total: sumCounts(j['status-counts']) } : null} />
            </span>
          </div>
        </div>
        <div class="job-actions">
          {webCancelEnabled() ? <CancelButton jid={jid} disabled={terminal} /> : null}
          <SavepointAction jid={jid} disabled={terminal} />
        </div>
      </div>
      {job.error ? <ErrorBox error={job.error} what="Refreshing the job failed; showing the last state" /> : null}
      {terminal ? <div class="note">This job has ended ({j.state}); the figures are final.</div> : null}
      <JobGraph job={j} live={live.data} selected={vid} onSelect={setSelected} />
      <nav class="tabs">
        {TABS.map(([t, label]) => (
          <a key={t} href={`#/jobs/${jid}${t ? `/${t}` : ''}`} class={t === current ? 'active' : ''} data-tab={t || 'vertex'}>
            {label}
          </a>
        ))}
      </nav>
      <div class="tab-body">
        {current === '' ? <VertexTab jid={jid} vid={vid} live={live.data?.[vid]} /> : null}
        {current === 'checkpoints' ? <CheckpointsTab jid={jid} /> : null}
        {current === 'exceptions' ? <ExceptionsTab jid={jid} /> : null}
        {current === 'metrics' ? <MetricsTab jid={jid} /> : null}
      </div>
    </div>
  );
}

function lower(counts) {
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k.toLowerCase(), v]));
}

function sumCounts(counts) {
  return Object.values(counts).reduce((a, b) => a + (num(b) || 0), 0);
}

