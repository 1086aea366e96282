// An agent's sessions beside its chat: the first question, when it was last used (relative time), how its
// last turn went in words (answered, failed, waiting for input, stopped; "scheduled" for a schedule's run),
// a search box and delete (asks first).
import { useState } from 'react';
import { api } from './api.js';
import { shownTurns, turnTree } from './branches.js';
import { notify } from './common.jsx';
import { relativeTime, route } from './util.js';

// the newest turn's end (server: c2g_turns.status) in words; "stopped" is the engine's word for a turn a
// component's error ended, so it reads "failed" here, and a cancelled turn reads "stopped"
const LAST_TURN = { stopped: 'failed', failed: 'failed', rejected: 'failed', paused: 'waiting for input', cancelled: 'stopped',
  interrupted: 'stopped', rolled_back: 'stopped', queued: 'running', running: 'running' };

/** How a session went: its number of turns and its status in words ("answered", "failed", "waiting for
 * input", "stopped", "running", "no answer"), from its last turn's end (`last_turn`) or else its log. */
export function sessionStatus(session) {
  const messages = (session.messages || []).filter(m => m.role === 'user' || m.role === 'assistant');
  const turns = shownTurns(turnTree(messages)).length;        // a fork's run is a version of a turn, not one more
  if (!turns) return { turns, text: 'not started' };
  const ended = LAST_TURN[(session.last_turn || {}).status];
  if (ended) return { turns, text: ended };
  const last = messages.at(-1);
  if (last.role === 'user') return { turns, text: 'no answer' };
  if (!last.content) return { turns, text: 'no answer' };
  return { turns, text: 'answered' };
}

export function sessionTitle(session) {
  const asked = (session.messages || []).find(m => m.role === 'user' && m.content);
  return asked ? asked.content.slice(0, 60) : (session.name || 'Session');
}

export function SessionsPanel({ agentId, sessions, current, onChanged }) {
  const [search, setSearch] = useState('');
  const [asking, setAsking] = useState(null);
  const words = search.trim().toLowerCase();
  const shown = (sessions || []).filter(s => !words || (s.messages || []).some(m => String(m.content || '').toLowerCase().includes(words)));

  async function remove(session) {
    try {
      await api('DELETE', `/agents/${encodeURIComponent(agentId)}/sessions/${encodeURIComponent(session.id)}`);
      notify('Session deleted.');
      setAsking(null);
      if (session.id === current) location.hash = route('agents', agentId);
      onChanged();
    } catch (e) { notify(e.message, 'error'); }
  }

  return (
    <nav className="card sessions" aria-labelledby="sessions-title">
      <h2 id="sessions-title">Sessions</h2>
      <input type="search" aria-label="Search the sessions" placeholder="Search…" value={search} onChange={e => setSearch(e.target.value)} />
      <ul className="sessions-list">
        <li><a href={route('agents', agentId)} aria-current={current ? undefined : 'page'}>+ New session</a></li>
        {shown.map(s => {
          const status = sessionStatus(s);
          return (
            <li key={s.id} className="session-item">
              <a href={route('agents', agentId, 'sessions', s.id)} aria-current={s.id === current ? 'page' : undefined} data-session-id={s.id}>
                <span className="session-title">{sessionTitle(s)}</span>
                <span className="session-meta muted">
                  <time dateTime={s.update_date || ''} title={s.update_date || ''}>{relativeTime(s.update_time || s.update_date)}</time>
                  {' · '}{status.text}{status.turns > 1 ? ` · ${status.turns} turns` : ''}{s.source === 'schedule' ? ' · scheduled' : ''}
                </span>
              </a>
              {asking === s.id
                ? <span className="confirm">Delete it? <button type="button" className="danger" onClick={() => remove(s)}>Yes, delete</button>
                  <button type="button" onClick={() => setAsking(null)}>Keep</button></span>
                : <button type="button" className="link delete-session" aria-label={`Delete the session “${sessionTitle(s)}”`} onClick={() => setAsking(s.id)}>Delete</button>}
            </li>
          );
        })}
        {words && !shown.length ? <li className="muted">No session mentions “{search}”.</li> : null}
      </ul>
    </nav>
  );
}
