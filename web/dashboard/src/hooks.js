// Small hooks for polling the REST API and for the hash router.
import { useEffect, useRef, useState } from 'preact/hooks';
import { refreshInterval } from './api.js';

// Calls `load` now and every refresh interval (or `intervalMs`) while mounted
// and `deps` stay the same. Keeps the last good data when a later call fails;
// when `deps` change the data is dropped unless `keep`.
// Returns { data, error, loaded }.
export function usePoll(load, deps, { intervalMs, keep } = {}) {
  const [state, setState] = useState({ data: undefined, error: null, loaded: false });
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    let stopped = false;
    let timer = 0;
    if (!keep) setState({ data: undefined, error: null, loaded: false });
    const tick = async () => {
      try {
        const data = await loadRef.current();
        if (!stopped) setState({ data, error: null, loaded: true });
      } catch (error) {
        if (!stopped) setState((s) => ({ data: s.data, error, loaded: true }));
      }
      if (!stopped) timer = setTimeout(tick, intervalMs ?? refreshInterval());
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);
  return state;
}

// The current time, updated every second (for live durations).
export function useNow() {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}

// The route from location.hash: "#/jobs/abc/checkpoints" -> ["jobs", "abc", "checkpoints"].
export function useRoute() {
  const parse = () =>
    location.hash
      .replace(/^#\/?/, '')
      .split('/')
      .filter(Boolean)
      .map(decodeURIComponent);
  const [route, setRoute] = useState(parse);
  useEffect(() => {
    const f = () => setRoute(parse());
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  return route;
}
