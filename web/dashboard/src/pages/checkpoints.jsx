// The Checkpoints tab of a job: counts, the latest ones, a chart of duration
// and size by checkpoint id, the history and the checkpointing configuration.
import { get } from '../api.js';
import { Card, Chart, ErrorBox, KeyValues, Loading, StateBadge } from '../components.jsx';
import { DASH, fmtBytes, fmtDuration, fmtTime, isNum, num } from '../format.js';
import { usePoll } from '../hooks.js';

// Alignment of one history entry: the buffered bytes Flink reports and, when
// the server gives it, the alignment time.
function alignment(c) {
  const parts = [];
  const t = c.alignment_duration ?? c.alignment_duration_ms ?? c.alignmentDuration;
  if (isNum(num(t))) parts.push(fmtDuration(t));
  if (isNum(num(c.alignment_buffered))) parts.push(fmtBytes(c.alignment_buffered));
  return parts.length ? parts.join(' / ') : DASH;
}

function CheckpointChart({ history }) {
  const points = history
    .filter((c) => isNum(num(c.id)))
    .sort((a, b) => num(a.id) - num(b.id));
  if (points.length === 0) return null;
  const data = [
    points.map((c) => num(c.id)),
    points.map((c) => (c.status === 'COMPLETED' ? num(c.end_to_end_duration) : null)),
    points.map((c) => (c.status === 'COMPLETED' ? num(c.checkpointed_size) : null)),
  ];
  return (
    <Chart
      chartKey="checkpoints"
      data={data}
      scales={{ x: { time: false }, ms: { auto: true }, bytes: { auto: true } }}
      series={[
        { label: 'Checkpoint', value: (u, v) => (v == null ? DASH : `#${v}`) },
        {
          label: 'Duration',
          spanGaps: true,
          scale: 'ms',
          stroke: '#2f6fdb',
          width: 2,
          points: { show: true, size: 6 },
          value: (u, v) => (v == null ? DASH : fmtDuration(v)),
        },
        {
          label: 'Checkpointed size',
          spanGaps: true,
          scale: 'bytes',
          stroke: '#e8833a',
          width: 2,
          points: { show: true, size: 6 },
          value: (u, v) => (v == null ? DASH : fmtBytes(v)),
        },
      ]}
      axes={[
        { label: 'checkpoint id', values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? v : '')) },
        { scale: 'ms', label: 'duration', size: 70, values: (u, vals) => vals.map((v) => fmtDuration(v)) },
        {
          scale: 'bytes',
          side: 1,
          label: 'size',
          size: 80,
          grid: { show: false },
          values: (u, vals) => vals.map((v) => fmtBytes(v)),
        },
      ]}
    />
  );
}

function ConfigTable({ cfg }) {
  if (!cfg) return null;
  const ext = cfg.externalization || {};
  const ms = (v) => (isNum(num(v)) ? fmtDuration(v) : DASH);
  const rows = [
    ['Checkpointing mode', cfg.mode ? String(cfg.mode).replace(/_/g, ' ').toUpperCase() : DASH],
    ['Interval', ms(cfg.interval)],
    ['Timeout', ms(cfg.timeout)],
    ['Minimum pause between checkpoints', ms(cfg.min_pause)],
    ['Maximum concurrent checkpoints', cfg.max_concurrent],
    ['Unaligned checkpoints', cfg.unaligned_checkpoints === undefined ? DASH : String(cfg.unaligned_checkpoints)],
    ['Persist checkpoints externally', ext.enabled === undefined ? DASH : ext.enabled ? (ext.delete_on_cancellation ? 'Enabled, deleted on cancellation' : 'Enabled, retained on cancellation') : 'Disabled'],
    ['Tolerable failed checkpoints', cfg.tolerable_failed_checkpoints],
    ['State backend', cfg.state_backend],
    ['Checkpoint storage', cfg.checkpoint_storage],
  ];
  return <KeyValues rows={rows} />;
}

export function CheckpointsTab({ jid }) {
  const stats = usePoll(() => get(`/jobs/${jid}/checkpoints`), [jid]);
  const config = usePoll(() => get(`/jobs/${jid}/checkpoints/config`), [jid]);
  if (!stats.loaded) return <Loading />;
  const s = stats.data;
  const counts = s?.counts || {};
  const history = s?.history || [];
  const latest = s?.latest || {};
  const done = latest.completed;
  return (
    <div data-field="checkpoints">
      <ErrorBox error={stats.error} what="Checkpoint statistics" />
      {s ? (
        <>
          <div class="cards">
            <Card label="Triggered" value={counts.total} field="checkpoints-total" />
            <Card label="In progress" value={counts.in_progress} field="checkpoints-in-progress" />
            <Card label="Completed" value={counts.completed} field="checkpoints-completed" />
            <Card label="Failed" value={counts.failed} field="checkpoints-failed" />
            <Card label="Restored" value={counts.restored} field="checkpoints-restored" />
          </div>
          <div class="two-col">
            <div>
              <h3>Latest completed checkpoint</h3>
              {done ? (
                <KeyValues
                  rows={[
                    ['ID', done.id],
                    ['Completed', fmtTime(done.latest_ack_timestamp)],
                    ['End to end duration', fmtDuration(done.end_to_end_duration)],
                    ['Checkpointed size', fmtBytes(done.checkpointed_size)],
                    ['Full size', fmtBytes(done.state_size)],
                    ['Path', done.external_path || DASH],
                  ]}
                />
              ) : (
                <div class="muted">None yet.</div>
              )}
              {latest.failed ? (
                <>
                  <h3>Latest failed checkpoint</h3>
                  <KeyValues
                    rows={[
                      ['ID', latest.failed.id],
                      ['Failed at', fmtTime(latest.failed.failure_timestamp)],
                      ['Cause', latest.failed.failure_message || DASH],
                    ]}
                  />
                </>
              ) : null}
              {latest.restored ? (
                <>
                  <h3>Latest restore</h3>
                  <KeyValues
                    rows={[
                      ['ID', latest.restored.id],
                      ['Restored at', fmtTime(latest.restored.restore_timestamp)],
                      ['Savepoint', String(!!latest.restored.is_savepoint)],
                      ['Path', latest.restored.external_path || DASH],
                    ]}
                  />
                </>
              ) : null}
            </div>
            <div>
              <h3>Configuration</h3>
              {config.data ? (
                <ConfigTable cfg={config.data} />
              ) : config.error ? (
                <div class="muted">{config.error.message}</div>
              ) : (
                <Loading />
              )}
            </div>
          </div>
          <h3>Duration and size</h3>
          {history.length ? <CheckpointChart history={history} /> : <div class="muted">No checkpoints yet.</div>}
          <h3>History</h3>
          {history.length === 0 ? (
            <div class="muted">No checkpoints yet.</div>
          ) : (
            <table class="grid" data-field="checkpoint-history">
              <thead>
                <tr>
                  <th>ID</th>
                  <th>Status</th>
                  <th>Type</th>
                  <th>Acknowledged</th>
                  <th>Trigger time</th>
                  <th>Latest acknowledgement</th>
                  <th>End to end duration</th>
                  <th>Checkpointed size</th>
                  <th>Full size</th>
                  <th>Alignment</th>
                </tr>
              </thead>
              <tbody>
                {history.map((c) => (
                  <tr key={c.id} data-checkpoint-id={c.id} title={c.external_path || c.failure_message || ''}>
                    <td>{c.id}</td>
                    <td>
                      <StateBadge state={c.status} />
                    </td>
                    <td>{c.is_savepoint ? 'Savepoint' : 'Checkpoint'}</td>
                    <td>
                      {c.num_acknowledged_subtasks ?? DASH}/{c.num_subtasks ?? DASH}
                    </td>
                    <td class="nowrap">{fmtTime(c.trigger_timestamp)}</td>
                    <td class="nowrap">{fmtTime(c.latest_ack_timestamp)}</td>
                    <td>{fmtDuration(c.end_to_end_duration)}</td>
                    <td>{fmtBytes(c.checkpointed_size)}</td>
                    <td>{fmtBytes(c.state_size)}</td>
                    <td>{alignment(c)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      ) : null}
    </div>
  );
}
