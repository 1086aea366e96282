// The run page: the chat streaming the answer beside the agent on its canvas lighting up as events arrive
// (a divider shares the width between them, split.jsx; the chat can be hidden), a box's step in a drawer
// over the graph (stepdrawer.jsx), Begin / UserFillUp forms (the composer waits while one is open), Cancel,
// and the agent's sessions (reopening one shows its history, a forked turn as versions to switch between,
// branches.js, and the canvas as its last turn left it), and its schedules (schedules.jsx).
import { useEffect, useMemo, useRef, useState } from 'react';
import { api } from './api.js';
import { shownTurns, stepsOfVersion, turnTree } from './branches.js';
import { RunCanvas } from './canvas.jsx';
import { Chat, chatReducer } from './chat.jsx';
import { EndpointsPanel } from './endpoints.jsx';
import { DiagnosticsTable, Loading, PageError, notify, useLoad } from './common.jsx';
import { fieldLabel } from './forms.jsx';
import { statesFromSteps, stepsOfTurn } from './runstate.js';
import { SchedulesPanel } from './schedules.jsx';
import { SessionsPanel } from './sessions.jsx';
import { SplitPane } from './split.jsx';
import { StepDrawer } from './stepdrawer.jsx';
import { useTurn } from './turns.js';
import { plainError, route } from './util.js';
import './run.css';

const enc = encodeURIComponent;

/** A form's answer as the user's message: "Feedback: shorter". */
function answerText(answer, inputs) {
  return Object.entries(answer).map(([k, v]) => {
    const value = Array.isArray(v.value) ? v.value.map(f => f.name || f.id).join(', ') : v.value;
    return `${fieldLabel(k, (inputs || {})[k])}: ${value}`;
  }).join('\n');
}

const outcomeText = o => (o.cancelled ? 'Cancelled.' : o.failed ? 'Finished with an error.'
  : o.paused ? 'Paused: the agent waits for your answer to its form.' : 'Finished.');

/** The agent's sessions, and the one this page shows: a turn without one starts it, and the page takes
 * its id (the URL follows, without a new page). */
function useSessions(agentId, session) {
  const [sessionId, setSessionId] = useState(session ? session.id : null);
  const [sessions, setSessions] = useState([]);
  const sessionRef = useRef(sessionId);
  async function loadSessions() {
    setSessions(await api('GET', `/agents/${enc(agentId)}/sessions?dsl=false&page_size=100`).catch(() => []));
  }
  function adopt(id) {
    if (sessionRef.current === id) return;
    sessionRef.current = id;
    setSessionId(id);
    history.replaceState(null, '', route('agents', agentId, 'sessions', id));
    loadSessions();
  }
  return { sessionId, sessionRef, sessions, loadSessions, adopt };
}

function RunHeader({ agent, sessionId, showProblems }) {
  return (<>
    <div className="page-title">
      <h1>{agent.title}</h1>
      {sessionId ? <a className="button" href={route('agents', agent.id, 'sessions', sessionId, 'trace')}>Trace of this session</a> : null}
      <a className="button" href={route('agents', agent.id, 'edit')}>Edit on the canvas</a>
      <a className="button" href={route('agents', agent.id, 'evaluations')}>Evaluations</a>
      <a className="button" href="#/agents">All agents</a>
    </div>
    {showProblems ? (
      <section className="card" aria-labelledby="problems-title">
        <h2 id="problems-title" className="error">This agent does not compile: fix its DSL before running it</h2>
        <DiagnosticsTable diagnostics={agent.diagnostics} />
      </section>
    ) : null}
  </>);
}

/** A reopened session's log as chat items: the turns of one branch (`choice`: shownTurns'), a turn with
 * several versions (a fork ran it again) headed by a switcher that calls `onPick(parent, index)`. */
function replayItems(tree, choice, onPick) {
  let items = [];
  const apply = action => { items = chatReducer(items, action); };
  const answer = m => (m.content ? apply({ type: 'message', role: 'assistant', content: m.content, reference: m.reference })
    : apply({ type: 'notice', level: 'meta', text: 'No answer: the turn paused or ended without a message.' }));
  tree.lead.forEach(answer);
  for (const { turn, number, index, count } of shownTurns(tree, choice)) {
    if (count > 1) {
      // keyed by the turns' parent: the switcher stays the same element (and keeps the focus) across versions
      items = [...items, { kind: 'versions', key: `versions-${turn.parent ?? ''}`, number, index, count, fork: turn.fork,
        onPick: i => onPick(turn.parent ?? '', i) }];
    }
    const q = turn.question;
    // a fork's question as it ran (edited or not), once: the switcher says it ran the turn again
    const asked = q.fork && typeof q.fork.query === 'string' ? q.fork.query : q.content;
    apply({ type: 'message', role: 'user', content: asked || '(answered a form)' });
    turn.answers.forEach(answer);
  }
  return items;
}

/** The canvas as a reopened session's last turn left it; a paused one asks its form again (the trace
 * names the step it waits on). */
function resumePaused(agentId, sessionId, dsl, turn, askForm, setStatus) {
  api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}/trace`).then(trace => {
    const last = (trace.turns || []).at(-1);
    if (!last || turn.running) return;
    turn.setStates(statesFromSteps(stepsOfTurn(trace.turns, last), dsl, last.status));
    const step = last.status === 'paused' && (last.steps || []).at(-1);
    if (!step) return;
    const declared = (((dsl.components || {})[step.component_id] || {}).obj || {}).params || {};
    const form = step.form || { inputs: declared.inputs || {} };
    askForm(form.inputs || {}, form.tips || '');
    setStatus('Paused: the agent waits for your answer to its form.');
  }).catch(() => {});
}

/** The message box: disabled while a form waits (the form has the focus), Enter sends, Shift+Enter breaks. */
function Composer({ text, setText, formWaiting, running, box, onSubmit, onCancel }) {
  return (
    <form className="composer" aria-label="Chat input" onSubmit={onSubmit}>
      <label htmlFor="query">Your message</label>
      <textarea id="query" ref={box} rows={2} value={text} disabled={formWaiting}
        placeholder={formWaiting ? 'Answer the form above first' : 'Ask the agent…'}
        aria-describedby={formWaiting ? 'composer-wait' : undefined}
        onChange={e => setText(e.target.value)}
        onKeyDown={e => { if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) onSubmit(e); }} />
      {formWaiting ? <p id="composer-wait" className="muted">The agent waits for the form above.</p> : null}
      <div className="buttons">
        <button type="submit" className="primary" disabled={formWaiting || running}>Send</button>
        <button type="button" className="danger" disabled={!running} onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

export function RunPage({ agentId, sessionId, onAuthLost }) {
  const page = useLoad(async () => {
    const agent = await api('GET', `/agents/${enc(agentId)}`);
    const session = sessionId ? await api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}`) : null;
    return { agent, session };
  }, [agentId, sessionId], onAuthLost);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  return <RunView key={`${agentId}/${sessionId || ''}`} agent={page.data.agent} session={page.data.session} />;
}

/** Whether the chat is hidden (the graph then takes the whole width), remembered in localStorage. */
function useChatHidden() {
  const KEY = 'c2g.run.chatHidden';
  const [hidden, setHidden] = useState(() => { try { return localStorage.getItem(KEY) === '1'; } catch { return false; } });
  function set(value) {
    setHidden(value);
    try { localStorage.setItem(KEY, value ? '1' : '0'); } catch { /* private mode: not remembered */ }
  }
  return [hidden, set];
}

function RunView({ agent, session }) {
  const agentId = agent.id;
  const dsl = (session && session.dsl) || agent.dsl;
  const begin = (((dsl.components || {}).begin || {}).obj || {}).params || {};
  const turn = useTurn(dsl);
  const { sessionId, sessionRef, sessions, loadSessions, adopt } = useSessions(agentId, session);
  const [status, setStatus] = useState('');
  const [text, setText] = useState('');
  const [history, setHistory] = useState(() => (session ? { tree: turnTree(session.messages), choice: {} } : null));
  const [openStep, setOpenStep] = useState(null);        // the component whose step the drawer shows
  const [ended, setEnded] = useState(0);                 // turns ended on this page: the drawer reads its step again
  const [chatHidden, setChatHidden] = useChatHidden();
  const queryBox = useRef(null);
  const formWaiting = turn.items.some(i => i.kind === 'form' && !i.done);
  const shownHistory = useMemo(() => (history ? replayItems(history.tree, history.choice, pickVersion) : []),
    [history]);     // eslint-disable-line react-hooks/exhaustive-deps

  function askForm(inputs, tips, title = 'The agent asks', submitLabel = 'Send answer') {
    setChatHidden(false);           // the form is in the chat: a hidden chat would leave the turn waiting unseen
    turn.dispatch({ type: 'form', form: { title, tips, inputs, submitLabel, onSubmit: answer => run('', answer, inputs) } });
  }

  /** Show another version of a turn: the log is read again (it holds the turns run on this page since),
   * which then shows them all; a form still waiting stays, since the session stands there. */
  async function pickVersion(parent, index) {
    if (turn.running) return;
    const fresh = await api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionRef.current)}`).catch(() => null);
    turn.dispatch({ type: 'keep-waiting-forms' });
    const tree = fresh ? turnTree(fresh.messages) : history.tree;
    const choice = { ...history.choice, [parent]: index };
    setHistory({ tree, choice });
    showVersionOnCanvas(tree, shownTurns(tree, choice).at(-1));
  }

  /** The canvas as the last turn shown left it (an older version: the states its run had). */
  async function showVersionOnCanvas(tree, shown) {
    if (!shown) return;
    const logs = id => api('GET', `/agents/${enc(agentId)}/logs/${enc(id)}`).then(s => (Array.isArray(s) ? s : []));
    try {
      const steps = await stepsOfVersion(tree, shown.turn, logs);
      const last = steps.at(-1);
      if (!turn.running) turn.setStates(statesFromSteps(steps, dsl, last && last.form && !last.error ? 'paused' : 'finished'));
    } catch { /* the canvas keeps what it shows */ }
  }

  async function run(query, answer, inputs) {
    if (turn.running) return;
    // a new turn continues the session's current branch: show it, not an older version
    setHistory(h => (h && Object.keys(h.choice).length ? { ...h, choice: {} } : h));
    setStatus('Running…');
    turn.dispatch({ type: 'forms-done' });
    if (query || answer) turn.dispatch({ type: 'message', role: 'user', content: query || answerText(answer, inputs) });
    const body = { agent_id: agentId, query, stream: true, ...(sessionRef.current ? { session_id: sessionRef.current } : {}),
      ...(answer ? { inputs: answer } : {}) };
    try {
      const outcome = await turn.play('/agents/chat/completions', body, {
        onSession: adopt, onForm: data => askForm(data.inputs || {}, data.tips || '') });
      if (outcome) setStatus(outcomeText(outcome));
    } catch (e) {
      if (e.name !== 'AbortError') { turn.dispatch({ type: 'notice', level: 'error', text: plainError(e.message) }); setStatus('Failed.'); }
    } finally {
      setEnded(n => n + 1);
      loadSessions();
    }
  }

  // the history, or a new session's greeting and Begin form
  useEffect(() => {
    loadSessions();
    if (session) {
      resumePaused(agentId, session.id, dsl, turn, askForm, setStatus);
    } else {
      if (begin.prologue) turn.dispatch({ type: 'message', role: 'assistant', content: begin.prologue });
      if (begin.inputs && typeof begin.inputs === 'object' && Object.keys(begin.inputs).length) askForm(begin.inputs, '', 'Before you start', 'Start');
      else setTimeout(() => queryBox.current && queryBox.current.focus(), 0);
    }
    return () => turn.abort();
  }, []);       // eslint-disable-line react-hooks/exhaustive-deps

  async function cancel() {
    if (!sessionRef.current) return;
    // said before the request: a cancel ends the turn at once, and its stream may end before the answer
    // comes back, whose status ('Cancelled.') must not be overwritten
    setStatus('Cancelling…');
    try { await api('POST', `/tasks/${enc(sessionRef.current)}/cancel`); } catch (e) {
      setStatus(s => (s === 'Cancelling…' ? 'Running…' : s));
      notify(e.message, 'error');
    }
  }

  function submit(event) {
    event.preventDefault();
    if (formWaiting || turn.running) return;
    if (!text.trim()) { queryBox.current.focus(); return; }
    setText('');
    run(text);
  }

  const chat = (
    <section className="card chat" aria-labelledby="chat-title">
      <div className="chat-head">
        <h2 id="chat-title">Chat</h2>
        <button type="button" onClick={() => setChatHidden(true)} title="The graph takes the whole width">Hide the chat</button>
      </div>
      <Chat items={[...shownHistory, ...turn.items]} agentId={agentId} onError={m => notify(m, 'error')} />
      <p className="run-status muted" role="status">{status}</p>
      <Composer text={text} setText={setText} formWaiting={formWaiting} running={turn.running} box={queryBox}
        onSubmit={submit} onCancel={cancel} />
    </section>
  );
  const graph = (<>
    {chatHidden ? <button type="button" className="show-chat" onClick={() => setChatHidden(false)}>Show the chat</button> : null}
    <RunCanvas dsl={dsl} states={turn.states} onOpen={setOpenStep} selected={openStep}>
      {openStep ? <StepDrawer agentId={agentId} sessionId={sessionId} componentId={openStep} version={ended}
        running={(turn.states[openStep] || {}).state === 'running'}
        onClose={() => setOpenStep(null)} /> : null}
    </RunCanvas>
  </>);

  return (
    <>
      <RunHeader agent={agent} sessionId={sessionId} showProblems={agent.compiles === false && !session} />
      <div className="run-layout run-split">
        <SessionsPanel agentId={agentId} sessions={sessions} current={sessionId} onChanged={loadSessions} />
        <SplitPane storageKey="c2g.run.chatWidth" label="Resize the chat and the graph" hidden={chatHidden}
          first={chat} second={graph} />
      </div>
      <SchedulesPanel agent={agent} onRun={loadSessions} />
      <EndpointsPanel agent={agent} />
    </>
  );
}
