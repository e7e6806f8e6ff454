// Building blocks shared by the pages.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { connection, getToken, onConnectionChange, registerTokenPrompt, setToken } from './api.js';
import { DASH, fmtClock } from './format.js';

// Flink's job and execution states, grouped by colour.
const STATE_CLASS = {
  RUNNING: 'running',
  FINISHED: 'finished',
  FAILED: 'failed',
  FAILING: 'failing',
  CANCELED: 'canceled',
  CANCELLING: 'failing',
  CANCELING: 'failing',
  RESTARTING: 'failing',
  SUSPENDED: 'canceled',
  RECONCILING: 'pending',
  INITIALIZING: 'pending',
  CREATED: 'pending',
  SCHEDULED: 'pending',
  DEPLOYING: 'pending',
  COMPLETED: 'finished',
  IN_PROGRESS: 'running',
};

export const TERMINAL_STATES = new Set(['FINISHED', 'FAILED', 'CANCELED', 'SUSPENDED']);

export function StateBadge({ state }) {
  const s = String(state || 'UNKNOWN').toUpperCase();
  return <span class={`badge state-${STATE_CLASS[s] || 'pending'}`}>{s}</span>;
}

export function Card({ label, value, field }) {
  return (
    <div class="card" data-field={field}>
      <div class="card-value">{value ?? DASH}</div>
      <div class="card-label">{label}</div>
    </div>
  );
}

export function ErrorBox({ error, what }) {
  if (!error) return null;
  return (
    <div class="error-box">
      {what ? `${what}: ` : ''}
      {error.message || String(error)}
    </div>
  );
}

export function Loading() {
  return <div class="muted">Loading{'\u2026'}</div>;
}

// Rows of [label, value].
export function KeyValues({ rows }) {
  return (
    <table class="kv">
      <tbody>
        {rows.map(([k, v], i) => (
          <tr key={i}>
            <th>{k}</th>
            <td>{v ?? DASH}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

// The connection indicator in the header: the time of the last answer, or
// why there is none.
export function ConnectionStatus() {
  const [, setTick] = useState(0);
  useEffect(() => onConnectionChange(() => setTick((t) => t + 1)), []);
  const { lastOk, error } = connection;
  return (
    <div class={`conn ${error ? 'conn-bad' : 'conn-ok'}`} data-field="last-updated">
      <span class="dot" />
      {error ? error : 'Live'}
      {lastOk ? ` \u00b7 updated ${fmtClock(lastOk)}` : ''}
    </div>
  );
}

// Asks for the REST token when a mutating call gets 401.
export function TokenDialog() {
  const [ask, setAsk] = useState(null); // { message, resolve }
  const [value, setValue] = useState('');
  const input = useRef();
  useEffect(() => {
    registerTokenPrompt(
      (message) =>
        new Promise((resolve) => {
          setValue(getToken());
          setAsk({ message, resolve });
        })
    );
    return () => registerTokenPrompt(null);
  }, []);
  useEffect(() => {
    if (ask && input.current) input.current.focus();
  }, [ask]);
  if (!ask) return null;
  const done = (token) => {
    ask.resolve(token);
    setAsk(null);
  };
  return (
    <div class="modal-backdrop">
      <form
        class="modal"
        data-field="token-dialog"
        onSubmit={(e) => {
          e.preventDefault();
          done(value.trim());
        }}
      >
        <h3>REST token required</h3>
        <p>
          {ask.message} It is the server's <code>rest.authentication.token</code>; it is kept in
          this browser.
        </p>
        <input
          ref={input}
          type="password"
          name="token"
          autocomplete="off"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
          placeholder="token"
        />
        <div class="modal-buttons">
          <button type="button" onClick={() => done(null)}>
            Cancel
          </button>
          {getToken() ? (
            <button
              type="button"
              onClick={() => {
                setToken('');
                setValue('');
              }}
            >
              Forget stored token
            </button>
          ) : null}
          <button type="submit" class="primary" disabled={!value.trim()}>
            Send
          </button>
        </div>
      </form>
    </div>
  );
}

// A uPlot chart that follows its container's width. `data` is uPlot's
// column data; `series` and `axes` are uPlot options that change only with `key`.
export function Chart({ data, series, axes, scales, height = 220, chartKey }) {
  const box = useRef();
  const plot = useRef();
  useEffect(() => {
    const el = box.current;
    plot.current = new uPlot(
      {
        width: el.clientWidth || 600,
        height,
        series,
        axes,
        scales,
        legend: { show: true },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      el
    );
    const ro = new ResizeObserver(() => {
      if (plot.current && el.clientWidth) plot.current.setSize({ width: el.clientWidth, height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [chartKey]);
  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  }, [data]);
  return <div class="chart" ref={box} />;
}
