// The agents page: each agent with its description, component count and last run; rename, download the
// DSL, delete (asks first; Escape cancels a rename or a delete); and a new agent from a pasted DSL, an
// uploaded file or a shipped template, checked before it is saved (every diagnostic against the component
// and field it names). A saved agent opens at once.
import { useEffect, useRef, useState } from 'react';
import { api, saveBlob } from './api.js';
import { DiagnosticsTable, Loading, PageError, notify, useLoad } from './common.jsx';
import { componentsOf, jsonError, plainError, relativeTime, route, titleText } from './util.js';

const enc = encodeURIComponent;

function LastRun({ agentId }) {
  const [when, setWhen] = useState(undefined);
  useEffect(() => {
    let live = true;
    api('GET', `/agents/${enc(agentId)}/sessions?dsl=false&page_size=1&orderby=update_time&desc=true`)
      .then(list => live && setWhen(list.length ? list[0].update_time || list[0].update_date : null)).catch(() => live && setWhen(null));
    return () => { live = false; };
  }, [agentId]);
  if (when === undefined) return <span className="muted">…</span>;
  return when ? <span>{relativeTime(when)}</span> : <span className="muted">never</span>;
}

function AgentRow({ agent, reload }) {
  const [mode, setMode] = useState('view');       // view | rename | delete
  const [title, setTitle] = useState(agent.title);
  const input = useRef(null);
  const count = Object.keys(componentsOf(agent.dsl)).length;
  useEffect(() => { if (mode === 'rename' && input.current) { input.current.focus(); input.current.select(); } }, [mode]);

  async function rename(event) {
    event.preventDefault();
    try {
      await api('PUT', `/agents/${enc(agent.id)}`, { title });
      notify(`Renamed to ${title}.`);
      setMode('view');
      reload();
    } catch (e) { notify(e.message, 'error'); }
  }
  async function remove() {
    try {
      await api('DELETE', `/agents/${enc(agent.id)}`);
      notify(`Deleted ${agent.title}.`);
      reload();
    } catch (e) { notify(e.message, 'error'); }
  }
  // Escape leaves a rename (the title as it was) or a delete's question, and gives the keyboard back to
  // the button that opened it
  function cancel(event) {
    if (event.key !== 'Escape' || mode === 'view') return;
    event.preventDefault();
    const back = mode === 'rename' ? 'Rename' : 'Delete';
    setTitle(agent.title);
    setMode('view');
    setTimeout(() => { const b = document.querySelector(`tr[data-agent-id="${CSS.escape(agent.id)}"] button[aria-label^="${back} "]`); if (b) b.focus(); }, 0);
  }
  function downloadDsl() {
    const blob = new Blob([JSON.stringify(agent.dsl, null, 2)], { type: 'application/json' });
    saveBlob(blob, `${agent.title.replace(/[^\w.-]+/g, '_') || 'agent'}.json`);
  }

  return (
    <tr data-agent-id={agent.id} onKeyDown={cancel}>
      <td>
        {mode === 'rename' ? (
          <form className="inline" onSubmit={rename}>
            <input ref={input} type="text" value={title} aria-label="New title" required onChange={e => setTitle(e.target.value)} />
            <button type="submit" className="primary">Save</button>
            <button type="button" onClick={() => { setTitle(agent.title); setMode('view'); }}>Cancel</button>
          </form>
        ) : <a href={route('agents', agent.id)} className="agent-link">{agent.title}</a>}
        {agent.description ? <div className="muted description">{agent.description}</div> : null}
      </td>
      <td className="count">{count} component{count === 1 ? '' : 's'}</td>
      <td><LastRun agentId={agent.id} /></td>
      <td><span title={agent.update_date || ''}>{relativeTime(agent.update_time || agent.update_date)}</span></td>
      <td className="actions">
        {mode === 'view' ? (<>
          <a className="button" href={route('agents', agent.id, 'edit')} aria-label={`Edit ${agent.title} on the canvas`}>Edit</a>
          <button type="button" onClick={() => setMode('rename')} aria-label={`Rename ${agent.title}`}>Rename</button>
          <button type="button" onClick={downloadDsl} aria-label={`Download the DSL of ${agent.title}`}>Download DSL</button>
          <button type="button" className="danger" onClick={() => setMode('delete')} aria-label={`Delete ${agent.title}`}>Delete</button>
        </>) : null}
        {mode === 'delete' ? (<>
          <span>Delete “{agent.title}” and its sessions? </span>
          <button type="button" className="danger" onClick={remove} autoFocus>Yes, delete</button>
          <button type="button" onClick={() => setMode('view')}>Keep</button>
        </>) : null}
      </td>
    </tr>
  );
}

/** Where a text is not JSON, in words: the server's parser names the line and column (the browser's does
 * not always). */
async function jsonProblem(text, error) {
  try {
    const verdict = await api('POST', '/graphs/compile', { dsl: text });
    const d = (verdict.diagnostics || []).find(x => x.code === 'invalid-json' && x.line);
    if (d) return `Not valid JSON at line ${d.line}, column ${d.column}: ${String(d.message).replace(/^invalid JSON:\s*/i, '')}.`;
  } catch (e) {
    // Python's parser: "... not JSON: Expecting value: line 3 column 14 (char 34)"
    const m = /JSON: ([^:]+): line (\d+) column (\d+)/.exec(e.message);
    if (m) return `Not valid JSON at line ${m[2]}, column ${m[3]}: ${m[1]}.`;
  }
  return jsonError(text, error);
}

/** Check a DSL text: {ok, message, diagnostics} in plain words (a JSON error with its line and column). */
export async function checkDsl(text) {
  if (!text.trim()) return { ok: false, message: 'Paste a DSL, upload a file or pick a template first.' };
  let dsl;
  try { dsl = JSON.parse(text); } catch (e) { return { ok: false, message: await jsonProblem(text, e) }; }
  try {
    const verdict = await api('POST', '/graphs/compile', { dsl });
    const errors = verdict.diagnostics.filter(d => d.severity === 'error').length;
    return { ok: verdict.ok, diagnostics: verdict.diagnostics, dsl,
      message: errors ? `${errors} error${errors > 1 ? 's' : ''}: fix ${errors > 1 ? 'them' : 'it'} before saving.`
        : `The DSL compiles${verdict.diagnostics.length ? ' (with warnings)' : ''}.` };
  } catch (e) {
    return { ok: false, message: plainError(e.message), diagnostics: e.data && e.data.diagnostics };
  }
}

function CreateForm({ templates }) {
  const [title, setTitle] = useState('');
  const [dsl, setDsl] = useState('');
  const [template, setTemplate] = useState('');
  const [result, setResult] = useState(null);
  const titleBox = useRef(null);

  async function check(text = dsl) {
    const verdict = await checkDsl(text);
    setResult(verdict);
    return verdict;
  }
  function pick(value) {
    setTemplate(value);
    const t = templates[Number(value)];
    if (!t || value === '') return;
    setDsl(JSON.stringify(t.dsl, null, 2));
    if (!title) setTitle(titleText(t.title, t.name || ''));
    setResult(null);
  }
  async function upload(event) {
    const chosen = event.target.files[0];
    if (!chosen) return;
    const text = await chosen.text();
    setDsl(text);
    if (!title) setTitle(chosen.name.replace(/\.json$/i, ''));
    await check(text);
  }
  async function save(event) {
    event.preventDefault();
    if (!title.trim()) { titleBox.current.focus(); return; }
    const verdict = await check();
    if (!verdict.ok) return;
    try {
      const agent = await api('POST', '/agents', { title: title.trim(), dsl: verdict.dsl });
      notify(`Saved ${agent.title}.`);
      location.hash = route('agents', agent.id);        // the new agent opens
    } catch (e) {
      setResult({ ok: false, message: plainError(e.message) });
    }
  }

  return (
    <form className="card create" aria-labelledby="create-title" onSubmit={save}>
      <h2 id="create-title">New agent</h2>
      <div className="fields">
        <div><label htmlFor="new-title">Title</label>
          <input ref={titleBox} id="new-title" type="text" required autoComplete="off" value={title} onChange={e => setTitle(e.target.value)} /></div>
        <div><label htmlFor="new-template">Start from a template</label>
          <select id="new-template" value={template} onChange={e => pick(e.target.value)}>
            <option value="">(none)</option>
            {templates.map((t, i) => <option key={i} value={String(i)}>{titleText(t.title, t.name || t.id)}</option>)}
          </select></div>
        <div><label htmlFor="new-file">Or upload a DSL file</label>
          <input id="new-file" type="file" accept=".json,application/json" onChange={upload} /></div>
      </div>
      <label htmlFor="new-dsl">DSL (JSON)</label>
      <textarea id="new-dsl" rows={12} spellCheck="false" required placeholder='{"components": {"begin": …}}' value={dsl}
        onChange={e => { setDsl(e.target.value); setResult(null); }} />
      <div className="buttons">
        <button type="button" onClick={() => check()}>Check</button>
        <button type="submit" className="primary">Save agent</button>
        <a className="button" href="#/new">Or build one on the canvas</a>
      </div>
      <div className="check-result" aria-live="polite">
        {result ? <p className={result.ok ? 'ok' : 'error'} role={result.ok ? 'status' : 'alert'}>{result.message}</p> : null}
        {result ? <DiagnosticsTable diagnostics={result.diagnostics} /> : null}
      </div>
    </form>
  );
}

export function AgentsPage({ onAuthLost }) {
  const page = useLoad(async () => {
    const [list, templates] = await Promise.all([api('GET', '/agents?page_size=100'),
      api('GET', '/agents/templates').catch(() => [])]);
    return { agents: list.canvas, templates };
  }, [], onAuthLost);
  useEffect(() => { document.title = 'Agents · canvas2graph'; }, []);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  const { agents, templates } = page.data;
  return (
    <>
      <h1>Agents</h1>
      <section className="card">
        {agents.length ? (
          <table className="agents">
            <caption>Your agents</caption>
            <thead><tr><th scope="col">Title</th><th scope="col">Components</th><th scope="col">Last run</th><th scope="col">Updated</th>
              <th scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{agents.map(a => <AgentRow key={a.id} agent={a} reload={page.reload} />)}</tbody>
          </table>
        ) : <p className="muted">No agents yet: create one below.</p>}
      </section>
      <CreateForm templates={templates} />
    </>
  );
}
