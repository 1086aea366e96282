// The ingestion page: run a pipeline DSL (File -> Parser -> ... -> Tokenizer) over documents into one of
// the tenant's datasets (POST /datasets/<id>/ingest) and watch it: the pipeline on the canvas lighting up
// for the file being ingested (each component's progress, message and elapsed time, as RAGFlow reports
// them), and every file's outcome with its progress log.
import { useRef, useState } from 'react';
import { stream } from './api.js';
import { RunCanvas } from './canvas.jsx';
import { DiagnosticsTable } from './common.jsx';
import { componentsOf, jsonError, plainError, seconds } from './util.js';

const DATASET = /^[A-Za-z0-9._:-]{1,128}$/;

/** The pipeline's canvas DSL out of what a file holds: a bare DSL, or RAGFlow's {dsl: ...} wrapper. */
export function pipelineDsl(value) {
  let dsl = value;
  while (dsl && typeof dsl === 'object' && !dsl.components && dsl.dsl && typeof dsl.dsl === 'object') dsl = dsl.dsl;
  return dsl && typeof dsl === 'object' && dsl.components ? dsl : null;
}

const percent = p => (p < 0 ? 'error' : `${Math.round(Math.min(1, Math.max(0, p)) * 100)} %`);

/** The component states of the file being ingested, after one progress entry. */
function applyProgress(states, entry) {
  const id = entry.component_id;
  if (!id) return states;
  const before = states[id] || {};
  if (entry.progress < 0) return { ...states, [id]: { state: 'error', detail: String(entry.message || '').replace(/^\[ERROR\]/, '') } };
  if (entry.progress >= 1 && entry.message === 'Done') {
    const took = before.startedAt ? (Date.now() - before.startedAt) / 1000 : entry.elapsed_time;
    return { ...states, [id]: { state: 'done', detail: seconds(took) } };
  }
  return { ...states, [id]: { state: 'running', startedAt: before.startedAt || Date.now(), detail: `${percent(entry.progress)} ${entry.message || ''}`.trim() } };
}

/** The files' rows after one event: {name: {state, chunks, error, resumed, log: [...]}}. */
function applyFileEvent(files, event) {
  const d = event.data || {};
  const row = files[d.name] || { state: 'waiting', log: [] };
  switch (event.event) {
    case 'file_started': return { ...files, [d.name]: { ...row, state: 'running', resumed: Boolean(d.resumed) } };
    case 'progress': return { ...files, [d.name]: { ...row, log: [...row.log, d] } };
    case 'file_finished': return { ...files, [d.name]: { ...row, state: 'done', chunks: d.chunks } };
    case 'file_skipped': return { ...files, [d.name]: { ...row, state: 'skipped', detail: d.reason || '' } };
    case 'file_failed': return { ...files, [d.name]: { ...row, state: 'failed', error: d.error } };
    default: return files;
  }
}

function FileRow({ name, row }) {
  const outcome = row.state === 'done' ? `${row.chunks} chunk${row.chunks === 1 ? '' : 's'}`
    : row.state === 'skipped' ? `unchanged${row.detail && row.detail !== 'unchanged' ? ` (${row.detail})` : ''}`
      : row.state === 'failed' ? row.error : row.state === 'running' ? (row.resumed ? 'continuing its interrupted run' : 'ingesting') : '';
  return (
    <tr className={`file-${row.state}`} data-file={name} data-state={row.state}>
      <td><code>{name}</code></td>
      <td className="state-text">{row.state}</td>
      <td className={row.state === 'failed' ? 'error' : ''}>{outcome}</td>
      <td>{row.log.length ? (
        <details>
          <summary>{row.log.length} progress entr{row.log.length === 1 ? 'y' : 'ies'}</summary>
          <table className="progress-log" aria-label={`Progress of ${name}`}>
            <thead><tr><th scope="col">Component</th><th scope="col">Progress</th><th scope="col">Message</th><th scope="col">Elapsed</th></tr></thead>
            <tbody>{row.log.map((e, i) => (
              <tr key={i} className={e.progress < 0 ? 'error' : ''}>
                <td><code>{e.component_id}</code></td><td>{percent(e.progress)}</td><td>{e.message}</td><td>{seconds(e.elapsed_time)}</td>
              </tr>))}
            </tbody>
          </table>
        </details>) : null}
      </td>
    </tr>
  );
}

export function IngestPage({ onAuthLost }) {
  const [dataset, setDataset] = useState('');
  const [dsl, setDsl] = useState(null);
  const [dslText, setDslText] = useState('');
  const [dslError, setDslError] = useState('');
  const [documents, setDocuments] = useState([]);
  const [embdId, setEmbdId] = useState('');
  const [running, setRunning] = useState(false);
  const [states, setStates] = useState({});
  const [current, setCurrent] = useState('');
  const [files, setFiles] = useState({});
  const [totals, setTotals] = useState(null);
  const [error, setError] = useState(null);
  const abort = useRef(null);

  async function pickPipeline(event) {
    const file = event.target.files[0];
    if (!file) return;
    const text = await file.text();
    setDslText(text);
    try {
      const found = pipelineDsl(JSON.parse(text));
      setDsl(found);
      setDslError(found ? '' : 'This file holds no canvas DSL (no `components`).');
    } catch (e) {
      setDsl(null);
      setDslError(jsonError(text, e));
    }
  }

  async function start(event) {
    event.preventDefault();
    if (!DATASET.test(dataset)) { setError({ message: "A dataset id is 1-128 letters, digits, '.', '_', ':' or '-'." }); return; }
    const form = new FormData();
    form.append('dsl', dslText);
    for (const f of documents) form.append('file', f, f.name);
    if (embdId.trim()) form.append('embd_id', embdId.trim());
    setRunning(true); setStates({}); setFiles(Object.fromEntries(documents.map(f => [f.name, { state: 'waiting', log: [] }])));
    setTotals(null); setError(null); setCurrent('');
    abort.current = new AbortController();
    try {
      await stream(`/datasets/${encodeURIComponent(dataset)}/ingest`, form, ev => {
        const d = ev.data || {};
        if (ev.event === 'file_started') { setCurrent(d.name); setStates({}); }
        if (ev.event === 'progress') setStates(s => applyProgress(s, d));
        if (ev.event === 'ingest_finished') setTotals(d);
        if (ev.event === 'ingest_failed') setError({ message: d.error });
        setFiles(f => applyFileEvent(f, ev));
      }, abort.current.signal);
    } catch (e) {
      if (e.status === 401) onAuthLost();
      else if (e.name !== 'AbortError') setError({ message: plainError(e.message), diagnostics: e.data && e.data.diagnostics });
    } finally {
      setRunning(false);
    }
  }

  const ready = dsl && documents.length && dataset && !running;
  return (<>
    <div className="page-title"><h1>Ingest documents</h1></div>
    <form className="card ingest-form" aria-labelledby="ingest-form-title" onSubmit={start}>
      <h2 id="ingest-form-title">Pipeline and documents</h2>
      <p className="muted">An ingestion pipeline (File → Parser → chunker → Tokenizer) runs over each document; the chunks go to
        your dataset, where your agents' Retrieval finds them. Unchanged documents are skipped.</p>
      <label htmlFor="ingest-dataset">Dataset id</label>
      <input id="ingest-dataset" type="text" value={dataset} onChange={e => setDataset(e.target.value)} placeholder="support-kb" required spellCheck="false" />
      <label htmlFor="ingest-pipeline">Pipeline DSL (.json)</label>
      <input id="ingest-pipeline" type="file" accept=".json,application/json" onChange={pickPipeline} aria-describedby="ingest-pipeline-error" />
      <p className="error" id="ingest-pipeline-error" role="alert">{dslError}</p>
      <label htmlFor="ingest-files">Documents</label>
      <input id="ingest-files" type="file" multiple onChange={e => setDocuments([...e.target.files])} />
      <label htmlFor="ingest-embd">Embedding model (optional)</label>
      <input id="ingest-embd" type="text" value={embdId} onChange={e => setEmbdId(e.target.value)} placeholder="text-embedding-3-small@OpenAI" spellCheck="false" />
      <div className="buttons">
        <button type="submit" className="primary" disabled={!ready}>{running ? 'Ingesting…' : 'Ingest'}</button>
        {running ? <button type="button" onClick={() => abort.current && abort.current.abort()}
          title="Stops the ingestion; the same request later skips the finished documents and continues the others">Stop</button> : null}
      </div>
    </form>
    {error ? (
      <section className="card" aria-labelledby="ingest-error-title">
        <h2 id="ingest-error-title" className="error">The ingestion did not run</h2>
        <p className="error" role="alert">{error.message}</p>
        <DiagnosticsTable diagnostics={error.diagnostics} />
      </section>) : null}
    {dsl ? <RunCanvas dsl={dsl} states={states} title={current ? `Pipeline: ${current}` : 'Pipeline'} /> : null}
    {Object.keys(files).length ? (
      <section className="card" aria-labelledby="ingest-files-title">
        <h2 id="ingest-files-title">Documents</h2>
        <p id="ingest-totals" role="status" aria-live="polite">{totals
          ? `Finished in ${seconds(totals.seconds)}: ${totals.ingested} ingested, ${totals.unchanged} unchanged, ${totals.failed} failed; ${totals.chunks} chunks${totals.pages ? `, ${totals.pages} pages` : ''}.`
          : running ? 'Ingesting…' : ''}</p>
        <table className="ingest-files" aria-label="Documents">
          <thead><tr><th scope="col">Document</th><th scope="col">State</th><th scope="col">Outcome</th><th scope="col">Progress</th></tr></thead>
          <tbody>{Object.entries(files).map(([name, row]) => <FileRow key={name} name={name} row={row} />)}</tbody>
        </table>
      </section>) : null}
    {dsl && !Object.keys(componentsOf(dsl)).length ? <p className="error">The pipeline has no components.</p> : null}
  </>);
}
