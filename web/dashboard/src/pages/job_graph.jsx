// The job graph: one box per JobGraph vertex, laid out by dagre from the
// plan's inputs, with live records/s, backpressure and busy time.
//
// Colours follow Flink's web UI: a box is the more red the busier its
// busiest subtask is, grey to black the more it is backpressured, and blue
// when it is mostly idle.
import dagre from '@dagrejs/dagre';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { get } from '../api.js';
import { StateBadge } from '../components.jsx';
import { DASH, fmtCount, fmtPercent, fmtRate, isNum, num } from '../format.js';

const BOX_W = 256;
const BOX_H = 128;

export const LIVE_METRICS = [
  'busyTimeMsPerSecond',
  'backPressuredTimeMsPerSecond',
  'idleTimeMsPerSecond',
  'numRecordsInPerSecond',
  'numRecordsOutPerSecond',
];

// Aggregated subtask metrics and the backpressure answer of every vertex:
// { [vid]: { recordsIn, recordsOut, busy, backPressured, idle, level, backpressure } }.
// Percentages are 0..100 of the busiest (max) subtask; records/s are sums.
export async function loadLive(jid, vertexIds) {
  const entries = await Promise.all(
    vertexIds.map(async (vid) => {
      const base = `/jobs/${jid}/vertices/${vid}`;
      const [metrics, backpressure] = await Promise.all([
        get(`${base}/subtasks/metrics?get=${LIVE_METRICS.join(',')}`).catch(() => null),
        get(`${base}/backpressure`).catch(() => null),
      ]);
      const m = {};
      for (const x of Array.isArray(metrics) ? metrics : []) m[x.id] = x;
      const agg = (id, kind) => num(m[id]?.[kind]);
      const pct = (id) => {
        const v = agg(id, 'max');
        return isNum(v) ? Math.min(100, Math.max(0, v / 10)) : NaN;
      };
      const live = {
        recordsIn: agg('numRecordsInPerSecond', 'sum'),
        recordsOut: agg('numRecordsOutPerSecond', 'sum'),
        busy: pct('busyTimeMsPerSecond'),
        backPressured: pct('backPressuredTimeMsPerSecond'),
        idle: pct('idleTimeMsPerSecond'),
        backpressure,
      };
      live.level = backpressureLevel(backpressure, live.backPressured);
      return [vid, live];
    })
  );
  return Object.fromEntries(entries);
}

// "ok" / "low" / "high": the server's answer, else from the backpressured
// time with Flink's thresholds (<= 10% ok, <= 50% low).
function backpressureLevel(bp, backPressuredPct) {
  const level = bp?.['backpressure-level'];
  if (typeof level === 'string' && level) return level.toLowerCase();
  if (!isNum(backPressuredPct)) return null;
  return backPressuredPct <= 10 ? 'ok' : backPressuredPct <= 50 ? 'low' : 'high';
}

// Fill and text colour of a vertex box.
export function vertexColors(live) {
  const busy = live?.busy;
  const bp = live?.backPressured;
  if (!isNum(busy) && !isNum(bp)) return { fill: '#f3f5f8', text: '#1f2933' };
  const b = isNum(busy) ? busy : 0;
  const p = isNum(bp) ? bp : 0;
  if (p >= 5 && p >= b) {
    const l = 90 - 0.8 * p; // 86% (a little) .. 10% (fully backpressured)
    return { fill: `hsl(0, 0%, ${l}%)`, text: l < 55 ? '#fff' : '#111' };
  }
  if (b >= 5) {
    const l = 94 - 0.44 * b; // pale red .. red at 100% busy
    return { fill: `hsl(0, 100%, ${l}%)`, text: l < 64 ? '#fff' : '#111' };
  }
  return { fill: 'hsl(210, 75%, 91%)', text: '#12263f' };
}

function layout(vertices, planNodes) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'LR', nodesep: 36, ranksep: 70, edgesep: 20, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set(vertices.map((v) => v.id));
  for (const v of vertices) g.setNode(v.id, { width: BOX_W, height: BOX_H });
  const edges = [];
  for (const n of planNodes || []) {
    if (!ids.has(n.id)) continue;
    (n.inputs || []).forEach((inp, i) => {
      if (!ids.has(inp.id)) return;
      const name = `${inp.id}>${n.id}#${i}`;
      const label = inp.ship_strategy || '';
      g.setEdge(inp.id, n.id, { width: label.length * 7 + 8, height: 16, labelpos: 'c' }, name);
      edges.push({ from: inp.id, to: n.id, name, label });
    });
  }
  dagre.layout(g);
  const graph = g.graph();
  return {
    width: Math.ceil(graph.width || BOX_W + 32),
    height: Math.ceil(graph.height || BOX_H + 32),
    nodes: Object.fromEntries(vertices.map((v) => [v.id, g.node(v.id)])),
    edges: edges.map((e) => {
      const l = g.edge(e.from, e.to, e.name);
      return { ...e, points: l.points || [], x: l.x, y: l.y };
    }),
  };
}

function edgePath(points) {
  if (points.length === 0) return '';
  let d = `M${points[0].x},${points[0].y}`;
  if (points.length === 2) return `${d} L${points[1].x},${points[1].y}`;
  // Smooth through the bend points: quadratic curves between midpoints.
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i];
    const q = points[i + 1];
    const mx = i === points.length - 2 ? q.x : (p.x + q.x) / 2;
    const my = i === points.length - 2 ? q.y : (p.y + q.y) / 2;
    d += ` Q${p.x},${p.y} ${mx},${my}`;
  }
  return d;
}

function VertexBox({ vertex, pos, live, selected, onSelect }) {
  const m = vertex.metrics || {};
  const { fill, text } = vertexColors(live);
  const level = live?.level ? live.level.toUpperCase() : DASH;
  return (
    <div
      class={`vertex${selected ? ' selected' : ''}`}
      data-vertex-id={vertex.id}
      style={{
        left: `${pos.x - BOX_W / 2}px`,
        top: `${pos.y - BOX_H / 2}px`,
        width: `${BOX_W}px`,
        height: `${BOX_H}px`,
        background: fill,
        color: text,
      }}
      onClick={() => onSelect(vertex.id)}
      title={vertex.name}
    >
      <div class="v-name" data-field="name">
        {vertex.name}
      </div>
      <div class="v-row">
        <span>
          Parallelism <b data-field="parallelism">{vertex.parallelism}</b>
        </span>
        <StateBadge state={vertex.status} />
      </div>
      <div class="v-row">
        <span>
          In <b data-field="records-in" data-value={live?.recordsIn}>{fmtRate(live?.recordsIn)}</b>
          /s
        </span>
        <span>
          Out{' '}
          <b data-field="records-out" data-value={live?.recordsOut}>
            {fmtRate(live?.recordsOut)}
          </b>
          /s
        </span>
      </div>
      <div class="v-row">
        <span>
          Backpressure{' '}
          <b data-field="backpressure" data-value={live?.backPressured} class={`bp-${live?.level}`}>
            {level}
          </b>
        </span>
        <span>
          Busy <b data-field="busy" data-value={live?.busy}>{fmtPercent(live?.busy)}</b>
        </span>
      </div>
      <div class="v-row v-small">
        <span>
          Read <b data-field="read-records" data-value={m['read-records']}>{fmtCount(m['read-records'])}</b>
        </span>
        <span>
          Written{' '}
          <b data-field="write-records" data-value={m['write-records']}>
            {fmtCount(m['write-records'])}
          </b>
        </span>
      </div>
    </div>
  );
}

export function JobGraph({ job, live, selected, onSelect }) {
  const vertices = job.vertices || [];
  const planNodes = job.plan?.nodes || [];
  const topology = JSON.stringify([
    vertices.map((v) => v.id),
    planNodes.map((n) => [n.id, (n.inputs || []).map((i) => [i.id, i.ship_strategy])]),
  ]);
  const g = useMemo(() => layout(vertices, planNodes), [topology]);
  // Shrink a wide graph to fit the page, down to 55%; scroll beyond that.
  const box = useRef();
  const [avail, setAvail] = useState(0);
  useEffect(() => {
    const el = box.current;
    if (!el) return undefined;
    const ro = new ResizeObserver(() => setAvail(el.clientWidth - 10));
    ro.observe(el);
    return () => ro.disconnect();
  }, [vertices.length > 0]);
  const scale = avail > 0 && g.width > avail ? Math.max(0.55, avail / g.width) : 1;
  if (vertices.length === 0) return <div class="muted">This job has no vertices.</div>;
  const graphStyle = {
    width: `${g.width}px`,
    height: `${g.height}px`,
    transform: scale < 1 ? `scale(${scale})` : undefined,
  };
  return (
    <div class="graph-scroll" ref={box}>
      <div class="graph-frame" style={{ width: `${g.width * scale}px`, height: `${g.height * scale}px` }}>
        <div class="graph" data-field="job-graph" data-scale={scale} style={graphStyle}>
          <svg width={g.width} height={g.height} class="edges">
            <defs>
              <marker
                id="arrow"
                viewBox="0 0 10 10"
                refX="9"
                refY="5"
                markerWidth="7"
                markerHeight="7"
                orient="auto-start-reverse"
              >
                <path d="M0,0 L10,5 L0,10 z" fill="#8a94a6" />
              </marker>
            </defs>
            {g.edges.map((e) => (
              <g key={e.name} data-edge={`${e.from}-${e.to}`}>
                <path
                  d={edgePath(e.points)}
                  fill="none"
                  stroke="#8a94a6"
                  stroke-width="1.6"
                  marker-end="url(#arrow)"
                />
                {e.label ? (
                  <text x={e.x} y={e.y + 4} class="edge-label" text-anchor="middle">
                    {e.label}
                  </text>
                ) : null}
              </g>
            ))}
          </svg>
          {vertices.map((v) => (
            <VertexBox
              key={v.id}
              vertex={v}
              pos={g.nodes[v.id]}
              live={live?.[v.id]}
              selected={v.id === selected}
              onSelect={onSelect}
            />
          ))}
        </div>
      </div>
      <div class="legend">
        <span class="swatch" style={{ background: 'hsl(210, 75%, 91%)' }} /> idle
        <span class="swatch" style={{ background: 'hsl(0, 100%, 72%)' }} /> busy
        <span class="swatch" style={{ background: 'hsl(0, 0%, 30%)' }} /> backpressured
        <span class="muted">
          {' '}
          · busy and backpressure of the busiest subtask, records/s summed over subtasks
        </span>
      </div>
    </div>
  );
}
