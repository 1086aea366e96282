// The page's shell: sign-in, the hash routes, and which page shows.
//   #/agents                                        the agents (list, create)
//   #/new                                           a new agent on the canvas editor
//   #/agents/<id>                                   run the agent: its canvas, a new chat, its sessions
//   #/agents/<id>/edit                              edit the agent on the canvas
//   #/agents/<id>/sessions/<sid>                    the same run page with a session reopened
//   #/agents/<id>/sessions/<sid>/trace[/<cid>]      every step of every turn (a component's step open), forks
//   #/agents/<id>/evaluations                       the agent's evaluations over datasets (testing.jsx)
//   #/ingest                                        run an ingestion pipeline over documents into a dataset (ingest.jsx)
//   #/memories                                      the tenant's memories (list, create, delete; memories.jsx)
//   #/memories/<id>                                 one memory: its messages, a search, read, disable, forget
import { useEffect, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';
import '@xyflow/react/dist/style.css';
import './style.css';
import { api, token, ApiError } from './api.js';
import { AgentsPage } from './agents.jsx';
import { Notice } from './common.jsx';
import { EditorPage } from './editor.jsx';
import { RunPage } from './run.jsx';
import { TracePage } from './trace.jsx';
import { EvaluationsPage } from './testing.jsx';
import { IngestPage } from './ingest.jsx';
import { MemoriesPage, MemoryPage } from './memories.jsx';

function SignIn({ message, onSignedIn }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState(message || '');
  const input = useRef(null);
  useEffect(() => { input.current.focus(); }, []);
  async function submit(event) {
    event.preventDefault();
    token.set(value.trim());
    try {
      await api('GET', '/agents?page_size=1');
    } catch (e) {
      token.clear();
      setError(e instanceof ApiError && (e.status === 401 || e.code === 109)
        ? 'This token is not valid (revoked or mistyped).' : `Cannot sign in: ${e.message}`);
      input.current.focus();
      return;
    }
    setValue('');
    onSignedIn();
  }
  return (
    <form className="card sign-in" aria-labelledby="sign-in-title" onSubmit={submit}>
      <h1 id="sign-in-title">Sign in</h1>
      <label htmlFor="token">API token</label>
      <input ref={input} id="token" name="token" type="password" autoComplete="off" required spellCheck="false"
        aria-describedby="token-help" value={value} onChange={e => setValue(e.target.value)} />
      <p className="muted" id="token-help">A token from <code>canvas2graph tokens create --tenant NAME</code>. It is kept in this
        tab only (sessionStorage) and sent in the Authorization header.</p>
      <button type="submit" className="primary">Sign in</button>
      <p className="error" role="alert" id="sign-in-error">{error}</p>
    </form>
  );
}

function parseRoute(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(p => { try { return decodeURIComponent(p); } catch { return p; } });
  if (parts[0] === 'new') return { page: 'edit', agentId: null };
  if (parts[0] === 'ingest') return { page: 'ingest' };
  if (parts[0] === 'memories') return parts[1] ? { page: 'memory', memoryId: parts[1] } : { page: 'memories' };
  if (parts[0] === 'agents' && parts[1]) {
    if (parts[2] === 'edit') return { page: 'edit', agentId: parts[1] };
    if (parts[2] === 'evaluations') return { page: 'evaluations', agentId: parts[1] };
    if (parts[2] === 'sessions' && parts[3] && parts[4] === 'trace') return { page: 'trace', agentId: parts[1], sessionId: parts[3], component: parts[5] || null };
    return { page: 'run', agentId: parts[1], sessionId: parts[2] === 'sessions' ? parts[3] || null : null };
  }
  return { page: 'agents' };
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(token.get()));
  const [lost, setLost] = useState('');
  // every hashchange is a new page, even to the hash the page started with: a run page that started a
  // session rewrote its URL with replaceState (no event), and "+ New session" links back to the plain one
  const [nav, setNav] = useState({ hash: location.hash, n: 0 });
  const main = useRef(null);
  useEffect(() => {
    const follow = () => setNav(v => ({ hash: location.hash, n: v.n + 1 }));
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, []);
  const onAuthLost = () => {
    token.clear();
    setLost('Your token is no longer valid: sign in again.');
    setSignedIn(false);
  };
  const route = parseRoute(nav.hash);
  const key = `${nav.n}:${nav.hash}`;       // a new page ends the old one's streams
  let page;
  if (!signedIn) {
    page = <SignIn message={lost} onSignedIn={() => {
      setLost('');
      setSignedIn(true);
      if (!location.hash.startsWith('#/') || location.hash === '#/') location.hash = '#/agents';
    }} />;
  } else if (route.page === 'run') page = <RunPage key={key} agentId={route.agentId} sessionId={route.sessionId} onAuthLost={onAuthLost} />;
  else if (route.page === 'trace') page = <TracePage key={key} {...route} onAuthLost={onAuthLost} />;
  else if (route.page === 'evaluations') page = <EvaluationsPage key={key} agentId={route.agentId} onAuthLost={onAuthLost} />;
  else if (route.page === 'ingest') page = <IngestPage key={key} onAuthLost={onAuthLost} />;
  else if (route.page === 'memories') page = <MemoriesPage key={key} onAuthLost={onAuthLost} />;
  else if (route.page === 'memory') page = <MemoryPage key={key} memoryId={route.memoryId} onAuthLost={onAuthLost} />;
  else if (route.page === 'edit') page = <EditorPage key={key} agentId={route.agentId} onAuthLost={onAuthLost} />;
  else page = <AgentsPage key={key} onAuthLost={onAuthLost} />;

  return (
    <>
      <a className="skip" href="#main" onClick={e => { e.preventDefault(); main.current.focus(); }}>Skip to content</a>
      <header className="top">
        <a className="brand" href="#/agents">canvas2graph</a>
        <nav aria-label="Main"><a href="#/agents">Agents</a> <a href="#/ingest">Ingest</a> <a href="#/memories">Memories</a></nav>
        {signedIn ? <button type="button" id="sign-out" onClick={() => { token.clear(); setSignedIn(false); }}>Sign out</button> : null}
      </header>
      <main id="main" ref={main} tabIndex={-1}>{page}</main>
      <Notice />
    </>
  );
}

createRoot(document.getElementById('root')).render(<App />);
