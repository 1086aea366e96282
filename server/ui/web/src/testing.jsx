// Testing an agent from the UI (docs/testing.md), carried over from the first inspector's testing.js:
//   "Save as test": a session's regression case folder, zipped (POST .../sessions/<sid>/record), for
//   `canvas2graph test`;
//   #/agents/<id>/evaluations: run the agent (a version of it, or two to compare) over an uploaded
//   dataset, list its evaluations, read one's rows with their scores, compare two row by row.
import { useEffect, useRef, useState } from 'react';
import { api, request, saveBlob, ApiError } from './api.js';
import { Loading, PageError, notify, useLoad } from './common.jsx';
import { plainError, pretty, route } from './util.js';

const enc = encodeURIComponent;
const POLL_MS = 1000;

/** A button that downloads the session as a case folder (a zip). */
export function SaveAsTestButton({ agentId, sessionId }) {
  const [busy, setBusy] = useState(false);
  async function save() {
    setBusy(true);
    try {
      const response = await request('POST', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}/record`);
      if (!response.ok) {
        const reply = await response.json().catch(() => ({}));
        throw new ApiError(reply.message || `HTTP ${response.status}`, { status: response.status });
      }
      const found = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') || '');
      const name = found ? found[1] : 'case.zip';
      saveBlob(await response.blob(), name);
      notify(`Saved ${name}: unzip it and run "canvas2graph test" on the folder.`);
    } catch (e) {
      notify(`Cannot save the test: ${e.message}`, 'error');
    } finally {
      setBusy(false);
    }
  }
  return <button type="button" onClick={save} disabled={busy}>Save as test</button>;
}

const score = value => (value === null || value === undefined ? '–' : String(Math.round(value * 1000) / 1000));

function summaryLine(summary) {
  if (!summary) return '';
  if (summary.changed !== undefined) return `two versions: ${summary.changed} of ${summary.rows} rows changed`;
  const latency = summary.latency_ms || {};
  const cost = summary.cost === null || summary.cost === undefined ? 'not priced' : `$${summary.cost.toFixed(6)}`;
  return `score ${score(summary.score)} · ${summary.passed}/${summary.rows} passed · `
    + `${(summary.tokens || {}).total_tokens || 0} tokens · cost ${cost} · p50 ${Math.round(latency.p50 || 0)} ms, `
    + `p95 ${Math.round(latency.p95 || 0)} ms`;
}

const Pre = ({ value }) => <pre>{pretty(value)}</pre>;
const Head = ({ titles }) => <thead><tr>{titles.map(t => <th key={t} scope="col">{t}</th>)}</tr></thead>;

function RowsTable({ rows }) {
  return (
    <table className="evaluation-rows">
      <Head titles={['Row', 'Query', 'Expected', 'Answer', 'Score', 'Status']} />
      <tbody>{rows.map(r => (
        <tr key={r.row} className={r.score === 1 ? 'pass' : (r.score === null ? '' : 'fail')}>
          <td>{String(r.row)}</td><td><Pre value={r.query} /></td><td><Pre value={r.expected} /></td>
          <td><Pre value={r.answer} /></td><td title={r.reason || ''}>{score(r.score)}</td>
          <td>{r.error ? `${r.status}: ${r.error}` : String(r.status)}</td>
        </tr>
      ))}</tbody>
    </table>
  );
}

function ComparisonView({ comparison, title }) {
  const s = comparison.summary;
  return (<>
    <h2>{title}</h2>
    <p>{s.changed} of {s.rows} rows changed: {s.better} better, {s.worse} worse.</p>
    <p className="muted">A: {comparison.a.dsl} · {summaryLine(comparison.a.summary)}</p>
    <p className="muted">B: {comparison.b.dsl} · {summaryLine(comparison.b.summary)}</p>
    {!comparison.changed.length ? <p className="muted">No row changed.</p> : (
      <table className="evaluation-rows">
        <Head titles={['Row', 'Query', 'Change', 'A: answer', 'A', 'B: answer', 'B']} />
        <tbody>{comparison.changed.map(c => (
          <tr key={c.row} className={c.change === 'worse' ? 'fail' : (c.change === 'better' ? 'pass' : '')}>
            <td>{String(c.row)}</td><td><Pre value={c.query} /></td><td>{c.change}</td>
            <td><Pre value={c.a.answer} /></td><td>{score(c.a.score)}</td><td><Pre value={c.b.answer} /></td><td>{score(c.b.score)}</td>
          </tr>
        ))}</tbody>
      </table>
    )}
  </>);
}

function Detail({ shown }) {
  if (!shown) return null;
  if (shown.comparison) return <ComparisonView comparison={shown.comparison} title="Comparison" />;
  const e = shown.evaluation;
  const report = e.report;
  return (<>
    <h2>Evaluation {e.id.slice(0, 8)} · {e.dataset}</h2>
    <p className="muted">{e.status} · metric {e.metric}{e.judge ? ` (judge ${e.judge})` : ''}</p>
    {e.error ? <p className="error">{e.error}</p> : null}
    {report && report.format === 'canvas2graph-eval-comparison' ? <ComparisonView comparison={report} title="Two versions" /> : null}
    {report && report.format !== 'canvas2graph-eval-comparison' ? <><p>{summaryLine(report.summary)}</p><RowsTable rows={report.rows} /></> : null}
  </>);
}

function VersionSelect({ id, versions, empty }) {
  return (
    <select id={id} name={id} defaultValue="">
      <option value="">{empty}</option>
      {versions.map(v => <option key={v.id} value={v.id}>{`${v.title || v.id}${v.release ? ' (published)' : ''} · ${v.update_date || ''}`}</option>)}
    </select>
  );
}

function NewEvaluation({ agentId, versions, onStarted }) {
  const [error, setError] = useState('');
  async function submit(event) {
    event.preventDefault();
    setError('');
    try {
      const created = await api('POST', `/agents/${enc(agentId)}/evaluations`, new FormData(event.target));
      notify(`Evaluation started over ${created.rows} rows.`);
      await onStarted(created.id);
    } catch (e) { setError(plainError(e.message)); }
  }
  return (
    <form className="card evaluation-form" aria-labelledby="new-evaluation" onSubmit={submit}>
      <h2 id="new-evaluation">New evaluation</h2>
      <label htmlFor="dataset">Dataset (CSV or JSONL: columns query, expected, and Begin inputs)</label>
      <input id="dataset" name="file" type="file" accept=".csv,.jsonl" required />
      <label htmlFor="metric">Metric</label>
      <select id="metric" name="metric">{['contains', 'exact', 'regex', 'json', 'judge'].map(m => <option key={m} value={m}>{m}</option>)}</select>
      <label htmlFor="judge">Judge model</label>
      <input id="judge" name="judge" type="text" placeholder="model@Factory (for judge)" spellCheck="false" />
      <label htmlFor="version_id">Version</label><VersionSelect id="version_id" versions={versions} empty="the current DSL" />
      <label htmlFor="compare_version_id">Compare with</label><VersionSelect id="compare_version_id" versions={versions} empty="no comparison" />
      <button type="submit" className="primary">Run</button>
      <p className="error" role="alert">{error}</p>
    </form>
  );
}

/** The evaluations page. */
export function EvaluationsPage({ agentId, onAuthLost }) {
  const page = useLoad(async () => {
    const [agent, versions] = await Promise.all([api('GET', `/agents/${enc(agentId)}`), api('GET', `/agents/${enc(agentId)}/versions`)]);
    return { agent, versions };
  }, [agentId], onAuthLost);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  return <Evaluations agent={page.data.agent} versions={page.data.versions} />;
}

function Evaluations({ agent, versions }) {
  const agentId = agent.id;
  const [evaluations, setEvaluations] = useState([]);
  const [picked, setPicked] = useState([]);
  const [shown, setShown] = useState(null);
  const timer = useRef(null);
  const left = useRef(false);

  async function show(id) {
    const evaluation = await api('GET', `/agents/${enc(agentId)}/evaluations/${enc(id)}`);
    setShown({ evaluation });
  }
  async function load(openId) {
    clearTimeout(timer.current);
    const list = await api('GET', `/agents/${enc(agentId)}/evaluations`);
    setEvaluations(list);
    if (openId) await show(openId);
    if (!left.current && list.some(e => e.status === 'running')) timer.current = setTimeout(() => load(openId), POLL_MS);
  }
  async function pick(id, on) {
    const next = on ? [...picked, id] : picked.filter(p => p !== id);
    setPicked(next);
    if (next.length !== 2) return;
    try {
      setShown({ comparison: await api('GET', `/agents/${enc(agentId)}/evaluations/${enc(next[0])}/compare/${enc(next[1])}`) });
    } catch (e) { notify(e.message, 'error'); }
  }
  useEffect(() => {
    document.title = `Evaluations · ${agent.title} · canvas2graph`;
    load(null);
    return () => { left.current = true; clearTimeout(timer.current); };
  }, []);       // eslint-disable-line react-hooks/exhaustive-deps

  return (<>
    <div className="page-title">
      <h1>Evaluations · {agent.title}</h1>
      <a className="button" href={route('agents', agentId)}>Back to the agent</a>
    </div>
    <NewEvaluation agentId={agentId} versions={versions} onStarted={load} />
    <section className="card" aria-labelledby="evaluations-title">
      <h2 id="evaluations-title">Evaluations</h2>
      <p className="muted">Tick two to compare them row by row.</p>
      <table className="evaluations">
        <Head titles={['Compare', 'Id', 'Dataset', 'Metric', 'Status', 'Summary']} />
        <tbody>{evaluations.map(e => (
          <tr key={e.id} data-evaluation={e.id}>
            <td><input type="checkbox" aria-label={`Compare evaluation ${e.id.slice(0, 8)}`} checked={picked.includes(e.id)}
              onChange={ev => pick(e.id, ev.target.checked)} /></td>
            <td><button type="button" className="link" onClick={() => show(e.id)}>{e.id.slice(0, 8)}</button></td>
            <td>{e.dataset}</td><td>{e.metric}</td>
            <td>{e.progress ? `${e.status} (${e.progress.done}/${e.progress.total} rows)` : e.status}</td>
            <td>{summaryLine(e.summary)}</td>
          </tr>
        ))}</tbody>
      </table>
    </section>
    <section className="card" aria-live="polite" aria-label="Evaluation"><Detail shown={shown} /></section>
  </>);
}
