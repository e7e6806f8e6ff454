// The Sluice dashboard: a single page over Flink's REST API, routed by the
// location hash so the server needs no routes of its own:
//   #/                      overview and job list
//   #/jobs/<jid>[/<tab>]    one job (tabs: checkpoints, exceptions, metrics)
//   #/taskmanagers[/<id>]   TaskManagers
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { loadConfig } from './api.js';
import { ConnectionStatus, TokenDialog } from './components.jsx';
import { useRoute } from './hooks.js';
import { JobPage } from './pages/job.jsx';
import { OverviewPage } from './pages/overview.jsx';
import { TaskManagerPage, TaskManagersPage } from './pages/taskmanagers.jsx';
import './style.css';

function Page({ route }) {
  const [first, second, third] = route;
  if (first === 'jobs' && second) return <JobPage key={second} jid={second} tab={third} />;
  if (first === 'taskmanagers' && second) return <TaskManagerPage key={second} id={second} />;
  if (first === 'taskmanagers') return <TaskManagersPage />;
  if (!first || first === 'overview' || first === 'jobs') return <OverviewPage />;
  return (
    <div>
      <h2>Not found</h2>
      <p>
        There is no page <code>{location.hash}</code>. <a href="#/">Overview</a>
      </p>
    </div>
  );
}

function App() {
  const route = useRoute();
  const [config, setConfig] = useState(null);
  useEffect(() => {
    loadConfig().then(setConfig);
  }, []);
  const section = route[0] === 'taskmanagers' ? 'taskmanagers' : 'jobs';
  return (
    <>
      <header class="top">
        <a href="#/" class="brand">
          Sluice
        </a>
        <nav>
          <a href="#/" class={section === 'jobs' ? 'active' : ''}>
            Jobs
          </a>
          <a href="#/taskmanagers" class={section === 'taskmanagers' ? 'active' : ''}>
            TaskManagers
          </a>
        </nav>
        <div class="spacer" />
        {config?.['flink-version'] ? <span class="version">{config['flink-version']}</span> : null}
        <ConnectionStatus />
      </header>
      <main>{config ? <Page route={route} /> : null}</main>
      <TokenDialog />
    </>
  );
}

render(<App />, document.getElementById('app'));
