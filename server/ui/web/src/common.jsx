// Pieces several pages share: the diagnostics table, page-level loading and errors, the notice line.
import { useCallback, useEffect, useState } from 'react';
import { ApiError } from './api.js';
import { plainError } from './util.js';

/** The diagnostics of a check as a table: severity, component, field, problem. */
export function DiagnosticsTable({ diagnostics, onPick }) {
  if (!diagnostics || !diagnostics.length) return null;
  return (
    <table className="diagnostics" aria-label="Diagnostics">
      <thead><tr><th scope="col">Severity</th><th scope="col">Component</th><th scope="col">Field</th><th scope="col">Problem</th></tr></thead>
      <tbody>{diagnostics.map((d, i) => (
        <tr key={i} className={`severity-${d.severity}`} data-component={d.component_id || ''} data-field={d.field || ''}>
          <td>{d.severity || ''}</td>
          <td>{onPick && d.component_id ? <button type="button" className="link" onClick={() => onPick(d.component_id)}><code>{d.component_id}</code></button> : <code>{d.component_id || '(canvas)'}</code>}</td>
          <td><code>{d.field || ''}</code></td>
          <td>{d.message || d.code || ''}</td>
        </tr>
      ))}</tbody>
    </table>
  );
}

/** A status line for the whole page (polite live region), set from anywhere. */
let noticeSetter = null;
export function notify(text, kind = 'info') {
  if (noticeSetter) noticeSetter({ text: plainError(text), kind, at: Date.now() });
}
export function Notice() {
  const [notice, setNotice] = useState({ text: '', kind: 'info' });
  useEffect(() => {
    noticeSetter = setNotice;
    return () => { noticeSetter = null; };
  }, []);
  useEffect(() => {
    if (!notice.text) return undefined;
    const timer = setTimeout(() => setNotice({ text: '', kind: 'info' }), 6000);
    return () => clearTimeout(timer);
  }, [notice]);
  return <div id="notice" className="notice" role="status" aria-live="polite" data-kind={notice.kind}>{notice.text}</div>;
}

/** Load what a page shows; `error` is kept for the page to show in plain words (a lost token signs out). */
export function useLoad(loader, deps, onAuthLost) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const load = useCallback(async () => {
    try {
      const data = await loader();
      setState({ data, error: null, loading: false });
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.code === 109) && onAuthLost) onAuthLost();
      setState({ data: null, error: e, loading: false });
    }
  }, deps);       // eslint-disable-line react-hooks/exhaustive-deps
  useEffect(() => { setState(s => ({ ...s, loading: true })); load(); }, [load]);
  return { ...state, reload: load };
}

export function PageError({ error }) {
  const missing = error instanceof ApiError && (/ not found/.test(error.message) || error.status === 404);
  return (
    <div className="card">
      <h1>{missing ? 'Not found' : 'Something went wrong'}</h1>
      <p className="error" role="alert">{missing
        ? 'This page was not found: what it shows does not exist, or belongs to another tenant.'
        : plainError(error.message)}</p>
      <p><a href="#/agents">Back to the agents</a></p>
    </div>
  );
}

export function Loading() {
  return <p className="muted">Loading…</p>;
}
