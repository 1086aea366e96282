// An agent's saved versions inside the editor: the list (newest first, who saved each and when), what
// changed between two of them (or between one and the editor's unsaved state) as readable lines, and
// restore. RAGFlow's version dialog only shows and downloads a version; restoring here loads it into the
// editor as unsaved changes (one undo step), and "Save as a new version" then keeps it, so no saved
// version is ever overwritten.
import { useEffect, useState } from 'react';
import { api } from './api.js';
import { notify } from './common.jsx';
import { plainError } from './util.js';
import { diffDsl } from './versiondiff.js';

const enc = encodeURIComponent;
const CURRENT = 'editor';

function versionLabel(v, n) {
  return `Version ${n}${v.release ? ' (published)' : ''}`;
}

/** The versions panel. `dsl`: the editor's DSL now; `onRestore(dsl, label)` loads a version's DSL. */
export function VersionsPanel({ agentId, dsl, onRestore, onClose, savedAt }) {
  const [versions, setVersions] = useState(null);
  const [error, setError] = useState('');
  const [picked, setPicked] = useState([]);              // up to two version ids, or CURRENT
  const [full, setFull] = useState({});                  // id -> the version with its DSL
  useEffect(() => {
    let live = true;
    api('GET', `/agents/${enc(agentId)}/versions`).then(list => live && setVersions(list)).catch(e => live && setError(plainError(e.message)));
    return () => { live = false; };
  }, [agentId, savedAt]);

  async function load(id) {
    if (id === CURRENT || full[id]) return full[id];
    const v = await api('GET', `/agents/${enc(agentId)}/versions/${enc(id)}`);
    setFull(old => ({ ...old, [id]: v }));
    return v;
  }
  useEffect(() => { picked.forEach(id => load(id).catch(e => setError(plainError(e.message)))); }, [picked]);   // eslint-disable-line react-hooks/exhaustive-deps

  async function restore(v, label) {
    try {
      const got = await load(v.id);
      onRestore(got.dsl, label);
    } catch (e) { notify(e.message, 'error'); }
  }
  const toggle = id => setPicked(old => (old.includes(id) ? old.filter(x => x !== id) : [...old, id].slice(-2)));

  if (error) return <section className="card versions-panel" aria-label="Versions"><p className="error" role="alert">{error}</p></section>;
  if (!versions) return <section className="card versions-panel" aria-label="Versions"><p className="muted">Loading versions…</p></section>;
  const count = versions.length;
  const number = Object.fromEntries(versions.map((v, i) => [v.id, count - i]));
  const labelOf = id => (id === CURRENT ? 'the editor (unsaved)' : versionLabel(versions.find(v => v.id === id) || {}, number[id]));
  return (
    <section className="card versions-panel" aria-labelledby="versions-title">
      <div className="versions-head">
        <h2 id="versions-title">Versions</h2>
        <button type="button" onClick={onClose}>Close versions</button>
      </div>
      <p className="muted hint">Tick two to see what changed between them; restore loads a version into the editor as unsaved changes.</p>
      <ol className="version-list" aria-label="Saved versions, newest first">
        <li className="version-row">
          <label><input type="checkbox" checked={picked.includes(CURRENT)} onChange={() => toggle(CURRENT)} /> The editor now (unsaved changes included)</label>
        </li>
        {versions.map(v => (
          <li key={v.id} className="version-row" data-version-id={v.id}>
            <label>
              <input type="checkbox" checked={picked.includes(v.id)} onChange={() => toggle(v.id)} />
              {' '}<strong>{versionLabel(v, number[v.id])}</strong>
              <span className="muted"> · {v.update_date || v.create_date}{v.created_by ? ` · ${v.created_by}` : ''}</span>
            </label>
            <button type="button" onClick={() => restore(v, versionLabel(v, number[v.id]))} aria-label={`Restore ${versionLabel(v, number[v.id])}`}>Restore</button>
          </li>
        ))}
      </ol>
      <VersionDiff picked={picked} full={{ ...full, [CURRENT]: { dsl } }} versions={versions} labelOf={labelOf} />
    </section>
  );
}

function VersionDiff({ picked, full, versions, labelOf }) {
  if (picked.length < 2) return null;
  // the older one first: versions come newest first, the editor is newer than all
  const rank = id => (id === CURRENT ? -1 : versions.findIndex(v => v.id === id));
  const [older, newer] = [...picked].sort((a, b) => rank(b) - rank(a));
  if (!full[older] || !full[newer]) return <p className="muted">Loading…</p>;
  const changes = diffDsl(full[older].dsl, full[newer].dsl);
  return (
    <div className="version-diff" aria-live="polite">
      <h3>From {labelOf(older)} to {labelOf(newer)}</h3>
      {changes.length ? (
        <ul aria-label="Changes">{changes.map((c, i) => <li key={i} className={`change change-${c.kind}`}>{c.text}</li>)}</ul>
      ) : <p className="ok">No changes.</p>}
    </div>
  );
}
