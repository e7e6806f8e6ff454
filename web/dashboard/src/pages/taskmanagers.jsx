// "#/taskmanagers" (GET /taskmanagers) and "#/taskmanagers/<id>"
// (GET /taskmanagers/<id> and its metrics).
import { get } from '../api.js';
import { ErrorBox, KeyValues, Loading } from '../components.jsx';
import { DASH, fmtBytes, fmtCount, fmtDuration, fmtTime, isNum, num } from '../format.js';
import { useNow, usePoll } from '../hooks.js';

// Flink reports the time of the last heartbeat (epoch ms) under this name.
function heartbeat(ts, now) {
  const t = num(ts);
  if (!(t > 0)) return DASH;
  return `${fmtTime(t)} (${fmtDuration(Math.max(0, now - t))} ago)`;
}

export function TaskManagersPage() {
  const now = useNow();
  const tms = usePoll(() => get('/taskmanagers'), []);
  const list = tms.data?.taskmanagers || [];
  return (
    <div>
      <h2>TaskManagers</h2>
      <ErrorBox error={tms.error} what="TaskManagers" />
      {!tms.loaded ? (
        <Loading />
      ) : list.length === 0 ? (
        <div class="muted">No TaskManagers are registered.</div>
      ) : (
        <table class="grid" data-field="taskmanager-list">
          <thead>
            <tr>
              <th>ID</th>
              <th>Address</th>
              <th>Data port</th>
              <th>Last heartbeat</th>
              <th>Slots</th>
              <th>Free slots</th>
              <th>CPU cores</th>
              <th>Physical memory</th>
              <th>Free memory</th>
              <th>Managed memory</th>
            </tr>
          </thead>
          <tbody>
            {list.map((tm) => {
              const hw = tm.hardware || {};
              return (
                <tr
                  key={tm.id}
                  data-taskmanager-id={tm.id}
                  class="clickable"
                  onClick={() => (location.hash = `#/taskmanagers/${encodeURIComponent(tm.id)}`)}
                >
                  <td>
                    <a href={`#/taskmanagers/${encodeURIComponent(tm.id)}`} class="mono small">
                      {tm.id}
                    </a>
                  </td>
                  <td class="mono small">{tm.path || DASH}</td>
                  <td>{tm.dataPort ?? DASH}</td>
                  <td>{heartbeat(tm.timeSinceLastHeartbeat, now)}</td>
                  <td>{tm.slotsNumber ?? DASH}</td>
                  <td>{tm.freeSlots ?? DASH}</td>
                  <td>{hw.cpuCores ?? DASH}</td>
                  <td>{fmtBytes(hw.physicalMemory)}</td>
                  <td>{fmtBytes(hw.freeMemory)}</td>
                  <td>{fmtBytes(hw.managedMemory)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}

const TM_METRICS = [
  ['Status.Process.CPU.Load', 'CPU load', (v) => (isNum(num(v)) ? `${(num(v) * 100).toFixed(1)}%` : DASH)],
  ['Status.Process.Memory.RSS', 'Resident memory (RSS)', fmtBytes],
  ['Status.Flink.Memory.Managed.Used', 'Managed memory used', fmtBytes],
  ['Status.Flink.Memory.Managed.Total', 'Managed memory total', fmtBytes],
  ['Status.Shuffle.Netty.UsedMemory', 'Network memory used', fmtBytes],
  ['Status.Shuffle.Netty.TotalMemory', 'Network memory total', fmtBytes],
];

// A value of the free-form maps (hardware, memoryConfiguration, metrics):
// they are sizes in bytes, except counts and cores.
function autoFormat(key, v) {
  if (v === null || v === undefined) return DASH;
  if (typeof v === 'number') return /count|segments|cores/i.test(key) ? fmtCount(v) : fmtBytes(v);
  return String(v);
}

// "nettyShuffleMemoryUsed" -> "Netty shuffle memory used".
function humanize(key) {
  const words = key.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
  return (words.charAt(0).toUpperCase() + words.slice(1)).replace(/\bcpu\b/gi, 'CPU').replace(/\bjvm\b/gi, 'JVM');
}

function mapRows(obj) {
  return Object.entries(obj || {})
    .filter(([, v]) => typeof v !== 'object' || v === null)
    .map(([k, v]) => [<span title={k}>{humanize(k)}</span>, autoFormat(k, v)]);
}

export function TaskManagerPage({ id }) {
  const now = useNow();
  const tm = usePoll(() => get(`/taskmanagers/${encodeURIComponent(id)}`), [id]);
  const metrics = usePoll(
    () => get(`/taskmanagers/${encodeURIComponent(id)}/metrics?get=${TM_METRICS.map(([m]) => m).join(',')}`),
    [id]
  );
  const t = tm.data;
  const values = {};
  for (const m of Array.isArray(metrics.data) ? metrics.data : []) values[m.id] = m.value;
  const present = TM_METRICS.filter(([m]) => values[m] !== undefined);
  return (
    <div data-taskmanager-id={id}>
      <p class="crumbs">
        <a href="#/taskmanagers">TaskManagers</a> / <span class="mono">{id}</span>
      </p>
      <ErrorBox error={tm.error} what={tm.error?.status === 404 ? 'Not found' : 'TaskManager'} />
      {!t ? (
        tm.loaded ? null : <Loading />
      ) : (
        <div class="two-col">
          <div>
            <h3>TaskManager</h3>
            <KeyValues
              rows={[
                ['ID', <span class="mono">{t.id}</span>],
                ['Address', <span class="mono">{t.path || DASH}</span>],
                ['Data port', t.dataPort],
                ['Last heartbeat', heartbeat(t.timeSinceLastHeartbeat, now)],
                ['Slots', t.slotsNumber],
                ['Free slots', t.freeSlots],
              ]}
            />
            <h3>Hardware</h3>
            <KeyValues rows={mapRows(t.hardware)} />
          </div>
          <div>
            <h3>Resource usage</h3>
            <ErrorBox error={metrics.error} what="Metrics" />
            {present.length ? (
              <KeyValues
                rows={present.map(([m, label, f]) => [
                  label,
                  <span data-metric={m} data-value={values[m]}>
                    {f(values[m])}
                  </span>,
                ])}
              />
            ) : (
              <div class="muted">No resource metrics reported.</div>
            )}
            {t.metrics ? (
              <>
                <h3>Memory and network</h3>
                <KeyValues rows={mapRows(t.metrics)} />
              </>
            ) : null}
            {t.memoryConfiguration ? (
              <>
                <h3>Memory configuration</h3>
                <KeyValues rows={mapRows(t.memoryConfiguration)} />
              </>
            ) : null}
          </div>
        </div>
      )}
    </div>
  );
}
