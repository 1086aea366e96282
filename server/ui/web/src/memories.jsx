// The tenant's memories (RAGFlow's memory API, server/routes/memories.py, over LangGraph's Store):
//   #/memories        each memory with its types, models and size limit; create one; delete one (asks first)
//   #/memories/<id>   one memory: its settings, a search over it, and its raw exchanges newest first, each with
//                     the typed memories extracted from it; read a message, disable / enable it, forget it
//                     (asks first)
// An agent's Message saves its exchanges to memories and a Retrieval reads them: the editor's params form
// picks memories by name (memoryfield.jsx).
import { useEffect, useId, useRef, useState } from 'react';
import { api } from './api.js';
import { Loading, PageError, notify, useLoad } from './common.jsx';
import { plainError, relativeTime, route } from './util.js';

const enc = encodeURIComponent;
const PAGE_SIZE = 20;

/** RAGFlow's memory types, raw first: every memory keeps its raw exchanges. */
export const MEMORY_TYPES = [
  ['raw', 'Raw', 'each exchange as it was said'],
  ['semantic', 'Semantic', 'facts about the user and the world'],
  ['episodic', 'Episodic', 'what happened, and when'],
  ['procedural', 'Procedural', 'how the user wants things done'],
];

const typeName = t => (MEMORY_TYPES.find(([v]) => v === t) || [t, t])[1];

/** A memory's size limit in words ("5 MB"). */
export function sizeText(bytes) {
  if (typeof bytes !== 'number' || !isFinite(bytes)) return '';
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round((bytes / 1024) * 10) / 10} KB`;
  return `${bytes} bytes`;
}

function Types({ types }) {
  return <span className="memory-types">{(types || []).map(t => <span key={t} className={`tag type-${t}`}>{typeName(t)}</span>)}</span>;
}

/** A cell that names its column when a narrow window stacks the row (style.css: `td[data-label]::before`). */
const Cell = ({ label, children, className }) => <td className={className} data-label={label}><div>{children}</div></td>;

const Model = ({ id }) => (id ? <code className="model-id">{id}</code> : <span className="muted">none</span>);

// --- the list ------------------------------------------------------------------------------------------------

function MemoryRow({ memory: m, onChanged }) {
  const [asking, setAsking] = useState(false);
  const deleteButton = useRef(null);
  const asked = useRef(false);
  useEffect(() => {           // "Keep" or Escape: the focus goes back to Delete
    if (!asking && asked.current && deleteButton.current) deleteButton.current.focus();
    asked.current = asking;
  }, [asking]);
  async function remove() {
    try {
      await api('DELETE', `/memories/${enc(m.id)}`);
      notify(`Deleted the memory “${m.name}” and its messages.`);
      asked.current = false;
      onChanged();
    } catch (e) { notify(e.message, 'error'); }
  }
  return (
    <tr data-memory-id={m.id}>
      <Cell label="Memory">
        <a href={route('memories', m.id)} className="memory-link">{m.name}</a>
        {m.description ? <div className="muted description">{m.description}</div> : null}
      </Cell>
      <Cell label="Keeps"><Types types={m.memory_type} /></Cell>
      <Cell label="Models" className="memory-models">
        <div><span className="muted">Embedding:</span> <Model id={m.embd_id} /></div>
        <div><span className="muted">Chat:</span> <Model id={m.llm_id} /></div>
      </Cell>
      <Cell label="Size limit" className="memory-size">{sizeText(m.memory_size) || <span className="muted">…</span>}</Cell>
      <Cell label="Created"><span title={m.create_date || ''}>{relativeTime(m.create_time)}</span></Cell>
      <td className="memory-actions">
        <div className="row-actions">
          {asking ? (
            <span className="confirm" role="group" aria-label={`Delete the memory “${m.name}”?`}
              onKeyDown={e => { if (e.key === 'Escape') { e.preventDefault(); setAsking(false); } }}>
              Delete it with every message it holds?
              <button type="button" className="danger" onClick={remove}>Yes, delete</button>
              <button type="button" autoFocus onClick={() => setAsking(false)}>Keep</button>
            </span>
          ) : (<>
            <a className="button" href={route('memories', m.id)} aria-label={`Open the memory “${m.name}”`}>Open</a>
            <button ref={deleteButton} type="button" className="danger" onClick={() => setAsking(true)}
              aria-label={`Delete the memory “${m.name}”`}>Delete</button>
          </>)}
        </div>
      </td>
    </tr>
  );
}

function CreateMemoryForm() {
  const id = `memory-${useId().replace(/:/g, '')}`;
  const [name, setName] = useState('');
  const [types, setTypes] = useState(['raw']);
  const [embdId, setEmbdId] = useState('');
  const [llmId, setLlmId] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const extracting = types.some(t => t !== 'raw');
  const toggle = (type, on) => setTypes(old => MEMORY_TYPES.map(([t]) => t).filter(t => t === 'raw' || (t === type ? on : old.includes(t))));

  async function create(event) {
    event.preventDefault();
    setBusy(true);
    setError('');
    try {
      const memory = await api('POST', '/memories', { name: name.trim(), memory_type: types, embd_id: embdId.trim(), llm_id: llmId.trim() });
      notify(`Created the memory “${memory.name}”.`);
      location.hash = route('memories', memory.id);        // the new memory opens
    } catch (e) {
      setError(plainError(e.message));
      setBusy(false);
    }
  }

  return (
    <form className="card create-memory" aria-labelledby={`${id}-title`} onSubmit={create}>
      <h2 id={`${id}-title`}>New memory</h2>
      <p className="muted intro">An agent's Message saves each exchange to the memories it names; a Retrieval searching
        memories finds them again, in later sessions too. Typed memories are extracted from each exchange by the chat
        model, after the turn.</p>
      <div className="fields">
        <div><label htmlFor={`${id}-name`}>Name</label>
          <input id={`${id}-name`} type="text" required autoComplete="off" maxLength={128} value={name} onChange={e => setName(e.target.value)} /></div>
        <div><label htmlFor={`${id}-embd`}>Embedding model <span className="muted">(optional)</span></label>
          <input id={`${id}-embd`} type="text" spellCheck="false" autoComplete="off" placeholder="text-embedding-3-small@OpenAI"
            aria-describedby={`${id}-embd-help`} value={embdId} onChange={e => setEmbdId(e.target.value)} />
          <p className="muted hint" id={`${id}-embd-help`}>Without one, messages are ranked by their words alone.</p></div>
        <div><label htmlFor={`${id}-llm`}>Chat model {extracting ? null : <span className="muted">(optional)</span>}</label>
          <input id={`${id}-llm`} type="text" spellCheck="false" autoComplete="off" placeholder="gpt-4o-mini@OpenAI" required={extracting}
            aria-describedby={`${id}-llm-help`} value={llmId} onChange={e => setLlmId(e.target.value)} />
          <p className="muted hint" id={`${id}-llm-help`}>Extracts the typed memories: needed for any type but raw.</p></div>
      </div>
      <fieldset className="memory-type-choices">
        <legend>Keeps</legend>
        {MEMORY_TYPES.map(([type, label, what]) => (
          <div key={type} className="field-boolean">
            <input id={`${id}-type-${type}`} type="checkbox" checked={types.includes(type)} disabled={type === 'raw'}
              onChange={e => toggle(type, e.target.checked)} aria-describedby={`${id}-type-${type}-what`} />
            <label htmlFor={`${id}-type-${type}`}>{label}</label>
            <span className="muted hint" id={`${id}-type-${type}-what`}>{what}{type === 'raw' ? ' (always kept)' : ''}</span>
          </div>
        ))}
      </fieldset>
      <div className="buttons">
        <button type="submit" className="primary" disabled={busy}>Create memory</button>
      </div>
      <p className="error" role="alert">{error}</p>
    </form>
  );
}

export function MemoriesPage({ onAuthLost }) {
  const page = useLoad(async () => {
    const list = await api('GET', '/memories?page_size=100');
    const rows = list.memory_list || [];
    // the list leaves the size limit out: each memory's settings have it
    const configs = await Promise.all(rows.map(m => api('GET', `/memories/${enc(m.id)}/config`).catch(() => null)));
    return { memories: rows.map((m, i) => ({ ...m, ...(configs[i] || {}) })), total: list.total_count || rows.length };
  }, [], onAuthLost);
  useEffect(() => { document.title = 'Memories · canvas2graph'; }, []);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  const { memories, total } = page.data;
  return (<>
    <div className="page-title"><h1>Memories</h1></div>
    <section className="card" aria-labelledby="memories-title">
      <h2 id="memories-title" className="visually-hidden">Your memories</h2>
      {memories.length ? (<>
        <table className="memories-table">
          <caption>Your memories{total > memories.length ? ` (the newest ${memories.length} of ${total})` : ''}</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Keeps</th><th scope="col">Models</th><th scope="col">Size limit</th>
            <th scope="col">Created</th><th scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
          <tbody>{memories.map(m => <MemoryRow key={m.id} memory={m} onChanged={page.reload} />)}</tbody>
        </table>
      </>) : <p className="muted">No memories yet: create one below, then name it in a Message's “Save to memory”.</p>}
    </section>
    <CreateMemoryForm />
  </>);
}

// --- one memory --------------------------------------------------------------------------------------------

const messagePath = (memoryId, m) => `/messages/${enc(memoryId)}:${m.message_id}`;
const messageName = m => (m.message_type === 'raw' ? `exchange ${m.message_id}` : `${m.message_type} memory ${m.message_id}`);

/** A message's whole text, read when its box is opened (the list has no contents). */
function Content({ memoryId, message }) {
  const [text, setText] = useState(undefined);
  const [error, setError] = useState('');
  async function open(event) {
    if (!event.currentTarget.open || text !== undefined) return;
    try {
      setText((await api('GET', `${messagePath(memoryId, message)}/content`)).content || '');
    } catch (e) { setError(plainError(e.message)); }
  }
  return (
    <details className="message-content" onToggle={open}>
      <summary aria-label={`Read ${messageName(message)}`}>Read</summary>
      {error ? <p className="error">{error}</p> : text === undefined ? <p className="muted">Loading…</p>
        : <div className="text-value message-text">{text || <span className="muted">(empty)</span>}</div>}
    </details>
  );
}

function State({ message: m }) {
  return (<>
    {m.forget_at ? <span className="tag forgotten" title={`Forgotten at ${m.forget_at}`}>Forgotten</span>
      : m.status ? <span className="tag enabled">Enabled</span> : <span className="tag disabled">Disabled</span>}
    {m.forget_at ? <div className="muted hint">since {m.forget_at}</div> : null}
  </>);
}

function MessageActions({ memoryId, message: m, onChanged }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const forgetButton = useRef(null);
  const asked = useRef(false);
  const name = messageName(m);
  useEffect(() => {
    if (!asking && asked.current && forgetButton.current) forgetButton.current.focus();
    asked.current = asking;
  }, [asking]);
  async function toggle() {
    setBusy(true);
    try {
      await api('PUT', messagePath(memoryId, m), { status: !m.status });
      notify(m.status ? `Disabled: searches skip this ${m.message_type === 'raw' ? 'exchange' : 'memory'} until enabled.`
        : `Enabled: searches find this ${m.message_type === 'raw' ? 'exchange' : 'memory'} again.`);
      await onChanged();
    } catch (e) { notify(e.message, 'error'); }
    setBusy(false);
  }
  async function forget() {
    try {
      await api('DELETE', messagePath(memoryId, m));
      notify(`Forgotten: no search finds this ${m.message_type === 'raw' ? 'exchange' : 'memory'} any more.`);
      asked.current = false;
      setAsking(false);
      await onChanged();
    } catch (e) { notify(e.message, 'error'); }
  }
  if (m.forget_at) return null;
  return (
    <div className="row-actions">
      {asking ? (
        <span className="confirm" role="group" aria-label={`Forget ${name}?`}
          onKeyDown={e => { if (e.key === 'Escape') { e.preventDefault(); setAsking(false); } }}>
          Forget it? Searches will not find it again.
          <button type="button" className="danger" onClick={forget}>Yes, forget</button>
          <button type="button" autoFocus onClick={() => setAsking(false)}>Keep</button>
        </span>
      ) : (<>
        <button type="button" disabled={busy} onClick={toggle} aria-label={`${m.status ? 'Disable' : 'Enable'} ${name}`}>
          {m.status ? 'Disable' : 'Enable'}</button>
        <button ref={forgetButton} type="button" className="danger" onClick={() => setAsking(true)} aria-label={`Forget ${name}`}>Forget</button>
      </>)}
    </div>
  );
}

function Who({ message: m }) {
  const known = m.agent_id && m.agent_name && m.agent_name !== 'Unknown';
  return known ? <a href={route('agents', m.agent_id)}>{m.agent_name}</a>
    : <span className="muted" title={m.agent_id || ''}>{m.agent_id ? 'an agent not found' : 'none'}</span>;
}

function Session({ message: m }) {
  if (!m.session_id) return <span className="muted">none</span>;
  const known = m.agent_id && m.agent_name && m.agent_name !== 'Unknown';
  const short = m.session_id.length > 12 ? `${m.session_id.slice(0, 8)}…` : m.session_id;
  const text = <code className="session-id" title={m.session_id}>{short}</code>;
  return known ? <a href={route('agents', m.agent_id, 'sessions', m.session_id)} aria-label={`Open the session ${m.session_id}`}>{text}</a> : text;
}

function MessageRow({ memoryId, message: m, onChanged }) {
  const raw = m.message_type === 'raw';
  return (
    <tr className={`message-row ${raw ? 'raw' : 'extracted'}${m.forget_at ? ' forgotten' : ''}${m.status ? '' : ' off'}`}
      data-message-id={m.message_id} data-type={m.message_type}>
      <Cell label="Message" className="message-what">
        {raw ? <span className="message-kind">Exchange</span>
          : <span className="message-kind"><span aria-hidden="true" className="extract-mark">↳ </span><span className={`tag type-${m.message_type}`}>{typeName(m.message_type)}</span> memory</span>}
        {m.user_id ? <span className="muted"> · user <code>{m.user_id}</code></span> : null}
        <Content memoryId={memoryId} message={m} />
      </Cell>
      {/* a typed memory is of its exchange's agent and session: the cells stay empty (and unnamed when stacked) */}
      <Cell label={raw ? 'Agent' : undefined}>{raw ? <Who message={m} /> : null}</Cell>
      <Cell label={raw ? 'Session' : undefined}>{raw ? <Session message={m} /> : null}</Cell>
      <Cell label="Valid from" className="valid-at">{m.valid_at || ''}{m.invalid_at ? <div className="muted hint">until {m.invalid_at}</div> : null}</Cell>
      <Cell label="State" className="message-state"><State message={m} /></Cell>
      <td className="message-actions"><MessageActions memoryId={memoryId} message={m} onChanged={onChanged} /></td>
    </tr>
  );
}

function SearchMemory({ memoryId }) {
  const [query, setQuery] = useState('');
  const [found, setFound] = useState(null);
  const [asked, setAsked] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  async function search(event) {
    event.preventDefault();
    if (!query.trim()) return;
    setBusy(true);
    setError('');
    try {
      const params = new URLSearchParams({ memory_id: memoryId, query: query.trim(), top_n: '10' });
      setFound(await api('GET', `/messages/search?${params}`));
      setAsked(query.trim());
    } catch (e) { setError(plainError(e.message)); }
    setBusy(false);
  }
  return (
    <section className="card memory-search" aria-labelledby="memory-search-title">
      <h2 id="memory-search-title">Search</h2>
      <form className="search-form" role="search" onSubmit={search}>
        <label htmlFor="memory-query" className="inline-label">Search this memory</label>
        <input id="memory-query" type="search" value={query} onChange={e => setQuery(e.target.value)} placeholder="what does the user drink?"
          aria-describedby="memory-search-help" />
        <button type="submit" className="primary" disabled={busy || !query.trim()}>Search</button>
      </form>
      <p className="muted hint" id="memory-search-help">What an agent's Retrieval would find here: the closest messages, best
        first. Disabled and forgotten messages are never found.</p>
      {error ? <p className="error" role="alert">{error}</p> : null}
      <div aria-live="polite">
        {found === null ? null : found.length ? (
          <ol className="search-results" aria-label={`Found for “${asked}”`}>
            {found.map(m => (
              <li key={`${m.memory_id}:${m.message_id}`} data-message-id={m.message_id} data-type={m.message_type}>
                <div className="result-meta"><span className={`tag type-${m.message_type}`}>{typeName(m.message_type)}</span>
                  <span className="muted"> {m.valid_at}{m.session_id ? <> · session <code>{m.session_id}</code></> : null}</span></div>
                <div className="text-value message-text">{m.content}</div>
              </li>
            ))}
          </ol>
        ) : <p className="muted">Nothing here is close enough to “{asked}”.</p>}
      </div>
    </section>
  );
}

function Settings({ memory: m }) {
  return (
    <section className="card memory-settings" aria-labelledby="memory-settings-title">
      <h2 id="memory-settings-title">Settings</h2>
      <dl className="settings-list">
        <dt>Keeps</dt><dd><Types types={m.memory_type} /></dd>
        <dt>Embedding model</dt><dd><Model id={m.embd_id} /></dd>
        <dt>Chat model</dt><dd><Model id={m.llm_id} /></dd>
        <dt>Size limit</dt><dd>{sizeText(m.memory_size)} <span className="muted">· when full, the oldest messages are forgotten first ({m.forgetting_policy})</span></dd>
        <dt>Created</dt><dd><span title={m.create_date || ''}>{relativeTime(m.create_time)}</span></dd>
        {m.description ? <><dt>Description</dt><dd>{m.description}</dd></> : null}
        <dt>Id</dt><dd><code>{m.id}</code> <span className="muted">· what a Message's or a Retrieval's <code>memory_ids</code> holds</span></dd>
      </dl>
    </section>
  );
}

function Messages({ memoryId }) {
  const [page, setPage] = useState(1);
  const [data, setData] = useState(null);
  const [error, setError] = useState('');
  async function load(at = page) {
    try {
      const params = new URLSearchParams({ page: String(at), page_size: String(PAGE_SIZE) });
      setData((await api('GET', `/memories/${enc(memoryId)}?${params}`)).messages);
      setError('');
    } catch (e) { setError(plainError(e.message)); }
  }
  useEffect(() => { load(page); }, [memoryId, page]);      // eslint-disable-line react-hooks/exhaustive-deps
  const rows = data ? data.message_list || [] : [];
  const total = data ? data.total_count || 0 : 0;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  return (
    <section className="card memory-messages" aria-labelledby="memory-messages-title">
      <div className="section-head">
        <h2 id="memory-messages-title">Messages</h2>
        <button type="button" onClick={() => load()}>Refresh</button>
      </div>
      <p className="muted intro">Each exchange an agent saved here, newest first, with the typed memories extracted from it
        (they appear a little after the turn).</p>
      {error ? <p className="error" role="alert">Cannot read the messages: {error}</p> : null}
      {data === null && !error ? <Loading /> : null}
      {data && !rows.length ? <p className="muted">No messages yet: an agent whose Message saves to this memory adds one
        each turn.</p> : null}
      {rows.length ? (
        <table className="memory-messages-table">
          <caption className="visually-hidden">The memory's messages</caption>
          <thead><tr><th scope="col">Message</th><th scope="col">Agent</th><th scope="col">Session</th><th scope="col">Valid from</th>
            <th scope="col">State</th><th scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
          {rows.map(m => (
            <tbody key={m.message_id} className="exchange" data-message-id={m.message_id}>
              <MessageRow memoryId={memoryId} message={m} onChanged={() => load()} />
              {(m.extract || []).map(x => <MessageRow key={x.message_id} memoryId={memoryId} message={x} onChanged={() => load()} />)}
            </tbody>
          ))}
        </table>
      ) : null}
      {total > PAGE_SIZE ? (
        <div className="buttons pager">
          <button type="button" disabled={page <= 1} onClick={() => setPage(p => p - 1)}>Newer</button>
          <span className="muted">Page {page} of {pages} · {total} exchanges</span>
          <button type="button" disabled={page >= pages} onClick={() => setPage(p => p + 1)}>Older</button>
        </div>
      ) : data && rows.length ? <p className="muted hint">{total} exchange{total === 1 ? '' : 's'}</p> : null}
    </section>
  );
}

export function MemoryPage({ memoryId, onAuthLost }) {
  const page = useLoad(() => api('GET', `/memories/${enc(memoryId)}/config`), [memoryId], onAuthLost);
  useEffect(() => { if (page.data) document.title = `${page.data.name} · Memories · canvas2graph`; }, [page.data]);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  const memory = page.data;
  return (<>
    <div className="page-title">
      <h1>Memory · {memory.name}</h1>
      <a className="button" href="#/memories">All memories</a>
    </div>
    <div className="memory-layout">
      <Settings memory={memory} />
      <SearchMemory memoryId={memory.id} />
    </div>
    <Messages memoryId={memory.id} />
  </>);
}
