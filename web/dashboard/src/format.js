// Formatting of times, durations, sizes and rates for display.

export const DASH = '\u2014';

export function isNum(v) {
  return typeof v === 'number' && Number.isFinite(v);
}

export function num(v) {
  const n = typeof v === 'string' ? Number(v) : v;
  return isNum(n) ? n : NaN;
}

const pad = (n) => String(n).padStart(2, '0');

// Epoch milliseconds as local "YYYY-MM-DD HH:MM:SS"; nothing for unset (<= 0).
export function fmtTime(ts) {
  const t = num(ts);
  if (!(t > 0)) return DASH;
  const d = new Date(t);
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

export function fmtClock(d) {
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fmtDuration(ms) {
  const v = num(ms);
  if (!(v >= 0)) return DASH;
  if (v < 1000) return `${Math.round(v)} ms`;
  let s = Math.floor(v / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${(v / 1000).toFixed(v < 10000 ? 1 : 0)} s`;
}

// A job's or vertex's duration: live while it has not ended.
export function liveDuration(start, end, duration, now) {
  const s = num(start);
  const e = num(end);
  if (s > 0 && !(e > 0)) return now - s;
  const d = num(duration);
  return d >= 0 ? d : NaN;
}

export function fmtBytes(b) {
  const v = num(b);
  if (!isNum(v) || v < 0) return DASH;
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let x = v;
  let i = 0;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return i === 0 ? `${x} B` : `${x.toFixed(x < 10 ? 2 : 1)} ${units[i]}`;
}

export function fmtCount(n) {
  const v = num(n);
  return isNum(v) ? Math.round(v).toLocaleString('en-US') : DASH;
}

// Rates: 3 significant digits, K/M/G above a thousand.
export function fmtRate(r) {
  const v = num(r);
  if (!isNum(v)) return DASH;
  const a = Math.abs(v);
  if (a < 1000) return a < 10 ? v.toFixed(a === 0 ? 0 : 1) : Math.round(v).toString();
  const units = ['K', 'M', 'G', 'T'];
  let x = v;
  let i = -1;
  while (Math.abs(x) >= 1000 && i < units.length - 1) {
    x /= 1000;
    i++;
  }
  return `${x.toFixed(Math.abs(x) < 10 ? 2 : Math.abs(x) < 100 ? 1 : 0)}${units[i]}`;
}

export function fmtPercent(p) {
  const v = num(p);
  return isNum(v) ? `${Math.round(v)}%` : DASH;
}

// Watermarks are epoch ms as a string; Long.MIN_VALUE means none yet.
export function fmtWatermark(w) {
  const v = num(w);
  if (!isNum(v) || v <= -9.2e18) return 'No watermark';
  if (v >= 9.2e18) return 'End of time';
  return `${fmtTime(v)} (${Math.round(v)})`;
}
