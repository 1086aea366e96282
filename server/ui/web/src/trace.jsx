// The trace page: every step of every turn of a session as readable fields (text keeps its line breaks,
// bookkeeping keys such as `_created_time` only behind the "raw" switch, usage as "16 in / 22 out"),
// numbered per turn, with the time each started; a failed step opens with its inputs and prompt.
// "Run again from here" forks the session from a step (its inputs or outputs edited or not) and streams
// the new branch into a chat and the canvas, where the steps before the fork point show as done. A fork
// reads as another version of the turn it ran again (branches.js), numbered as that turn.
import { useEffect, useMemo, useRef, useState } from 'react';
import { api } from './api.js';
import { forkQuery, turnTree, versionsOf, versionTurns } from './branches.js';
import { RunCanvas } from './canvas.jsx';
import { Chat } from './chat.jsx';
import { Loading, PageError, useLoad } from './common.jsx';
import { Markdown } from './markdown.jsx';
import { statesFromSteps, stepsOfTurn } from './runstate.js';
import { useTurn } from './turns.js';
import { SaveAsTestButton } from './testing.jsx';
import { jsonError, plainError, pretty, route, seconds, toDate, usageText } from './util.js';

const enc = encodeURIComponent;
const bookkeeping = key => key.startsWith('_');

/** An object's fields as a list of name and value (strings keep their line breaks). */
function Fields({ value, raw }) {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) return <pre>{pretty(value)}</pre>;
  const entries = Object.entries(value).filter(([k]) => raw || !bookkeeping(k));
  if (!entries.length) return <p className="muted">(none)</p>;
  return (
    <dl className="fields-list">
      {entries.map(([k, v]) => (
        <div key={k} className="field-row">
          <dt><code>{k}</code></dt>
          <dd>{typeof v === 'string' ? <div className="text-value">{v}</div> : <pre>{pretty(v)}</pre>}</dd>
        </div>
      ))}
    </dl>
  );
}

function Block({ title, children, show = true }) {
  if (!show) return null;
  return <div className="trace-block"><h5>{title}</h5>{children}</div>;
}

function clock(value) {
  const date = toDate(value);
  return date ? date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }) : '';
}

/** One step as fields; `open` opens it (and, with `scroll`, brings it into view with the focus on it). */
export function StepView({ turn, step, index, raw, open, onFork, scroll = true }) {
  const failed = Boolean(step.error);
  const ref = useRef(null);
  useEffect(() => {
    if (open && scroll && ref.current) { ref.current.scrollIntoView({ block: 'center' }); ref.current.querySelector('summary').focus(); }
  }, [open]);       // eslint-disable-line react-hooks/exhaustive-deps
  const has = v => v && (typeof v !== 'object' || Object.keys(v).length);
  return (
    <details ref={ref} className={`step${failed ? ' failed' : ''}`} data-component={step.component_id || ''} data-step={String(step.step)}
      open={open || failed}>
      <summary>
        <span className="step-no">{index + 1}.</span>{' '}
        <code>{step.component_id || ''}</code>{' '}
        <span className="muted">{[step.component_name !== step.component_id ? step.component_name : '', step.component_type].filter(Boolean).join(' · ')}</span>
        {step.started_at ? <time className="muted step-time"> {clock(step.started_at)}</time> : null}
        <span className="elapsed">{seconds(step.elapsed)}{step.usage ? ` · ${usageText(step.usage)}` : ''}</span>
        {failed ? <span className="error"> error</span> : null}
        {step.form && turn.status === 'paused' ? <span className="paused-tag"> waits for a form</span> : null}
      </summary>
      <div className="step-body">
        {failed ? <Markdown text={String(step.error)} className="error step-error markdown" /> : null}
        {raw ? <pre className="raw">{pretty(step)}</pre> : (<>
          <Block title="Inputs" show={has(step.inputs)}><Fields value={step.inputs} raw={raw} /></Block>
          <Block title="Outputs" show={has(step.outputs)}><Fields value={step.outputs} raw={raw} /></Block>
          <Block title="Messages sent to the model" show={Array.isArray(step.messages) && step.messages.length > 0}>
            <ol className="model-messages">{(step.messages || []).map((m, i) => (
              <li key={i}><span className="role">{String((m && (m.role || m.type)) || 'message')}</span>
                <div className="text-value">{pretty(m && m.content !== undefined ? m.content : m)}</div></li>
            ))}</ol>
          </Block>
          <Block title="Usage" show={Boolean(step.usage)}>
            <p>{usageText(step.usage)}{step.usage && step.usage.total_tokens !== undefined ? ` (total_tokens ${step.usage.total_tokens}${step.usage.calls ? `, ${step.usage.calls} call${step.usage.calls > 1 ? 's' : ''}` : ''})` : ''}</p>
          </Block>
          <Block title="Tool calls" show={Array.isArray(step.tool_calls) && step.tool_calls.length > 0}>
            <ol>{(step.tool_calls || []).map((c, i) => (
              <li key={i}><code>{c.name}</code> ({seconds(c.elapsed)})<Fields value={c.arguments} raw={raw} /><div className="text-value">{c.result}</div></li>
            ))}</ol>
          </Block>
          <Block title="Waiting for this form" show={Boolean(step.form)}><Fields value={step.form} raw={raw} /></Block>
        </>)}
        {step.checkpoint_id ? <button type="button" className="primary" onClick={() => onFork(turn, step)}>Run again from here</button> : null}
      </div>
    </details>
  );
}

/** A turn's question as it was asked, or as a fork edited it. */
export function turnQuery(turn) {
  const query = forkQuery(turn);
  return typeof query === 'string' ? query : pretty(query);
}

function BranchSwitcher({ branches, shown, onPick }) {
  if (!branches || branches.length < 2) return null;
  return (
    <div className="card branches">
      <label htmlFor="branch-pick">Branch</label>
      <select id="branch-pick" value={shown || ''} onChange={e => onPick(e.target.value || null)}>
        {branches.map((b, i) => (
          // no turn count: the server counts a fork's run as a turn of its own, the page as a version of one
          <option key={b.checkpoint_id} value={b.current ? '' : b.checkpoint_id}>
            {b.current ? 'Current' : `Earlier branch ${branches.length - i}`}: {b.query || '(no question)'} · {b.status}
            {b.fork_of ? ' · ends with a turn run again' : ''}
          </option>
        ))}
      </select>
      <p className="muted">{branches.length} branches: each “Run again from here” leaves the branch it started from.</p>
    </div>
  );
}

/** A step whose output a failed step was reading when it failed without inputs or a prompt of its own
 * (a Message streaming an LLM's answer): it opens with the failure, since its prompt is the one that failed. */
export function feedsFailure(steps, i) {
  const next = steps[i + 1];
  const bare = s => !s.messages && !(s.inputs && Object.keys(s.inputs).length);
  return Boolean(next && next.error && bare(next) && !steps[i].error);
}

/** A turn of versionTurns: a fork reads as another version of the turn it ran again. `versions`:
 * {index, count} of its turn (from the session's log), when it has several. */
function TurnView({ turn, raw, openComponent, onFork, onShow, versions }) {
  const steps = turn.steps || [];
  const query = turnQuery(turn);
  return (
    <section className="card turn" data-turn={String(turn.turn)} aria-label={`Turn ${turn.turn}`}>
      <h2>Turn {turn.turn}{query ? <span className="query">: {query}</span> : null}</h2>
      <p className="muted">
        {turn.status || ''} · {steps.length} step{steps.length === 1 ? '' : 's'}
        {turn.started_at ? ` · started ${clock(turn.started_at)}` : ''}
        {versions && versions.count > 1 ? ` · version ${versions.index + 1} of ${versions.count}` : ''}
        {turn.rerun ? ` · run again from step ${turn.rerun.step + 1} (${turn.rerun.component_id})` : ''}
      </p>
      <button type="button" onClick={() => onShow(turn)}>Show turn {turn.turn} on the canvas</button>
      <ol className="steps">{steps.map((step, i) => (
        <li key={`${step.checkpoint_id}-${step.component_id}`}>
          <StepView turn={turn} step={step} index={i} raw={raw} onFork={onFork}
            open={openComponent === step.component_id || feedsFailure(steps, i)} />
        </li>
      ))}</ol>
    </section>
  );
}

function ForkForm({ agentId, sessionId, turn, step, dsl, play, onDone, onClose, setStates }) {
  const original = useMemo(() => ({ inputs: pretty(step.inputs || {}), outputs: pretty(step.outputs || {}) }), [step]);
  const [inputs, setInputs] = useState(original.inputs);
  const [outputs, setOutputs] = useState(original.outputs);
  const [error, setError] = useState('');
  const [result, setResult] = useState(null);
  const box = useRef(null);
  useEffect(() => { if (box.current) { box.current.scrollIntoView({ block: 'nearest' }); box.current.focus(); } }, [step]);

  async function submit(event) {
    event.preventDefault();
    setError('');
    const body = { checkpoint_id: step.checkpoint_id, component_id: step.component_id, stream: true };
    try {
      if (inputs.trim() !== original.inputs.trim()) body.inputs = JSON.parse(inputs);
    } catch (e) { setError(`Inputs: ${jsonError(inputs, e)}`); return; }
    try {
      if (outputs.trim() !== original.outputs.trim()) body.outputs = JSON.parse(outputs);
    } catch (e) { setError(`Outputs: ${jsonError(outputs, e)}`); return; }
    // the canvas: the steps before the fork point as done, the rest waiting for the new branch
    const before = (turn.steps || []).slice(0, (turn.steps || []).indexOf(step));
    setStates(statesFromSteps(before, dsl, 'running'));
    let branch = null;
    try {
      await play(`/agents/${enc(agentId)}/sessions/${enc(sessionId)}/fork`, body, { onSession: id => { branch = id; }, keepStates: true });
      setResult({ branch });
      onDone();
    } catch (e) {
      if (e.name !== 'AbortError') setError(plainError(e.message));
    }
  }

  return (
    <form className="fork-form" onSubmit={submit}>
      <p>From step {(turn.steps || []).indexOf(step) + 1} of turn {turn.turn} (<code>{step.component_id}</code>). Edit its inputs or outputs, or leave them as they were; the original branch stays.</p>
      <label htmlFor="fork-inputs">Inputs (JSON)</label>
      <textarea ref={box} id="fork-inputs" rows={6} spellCheck="false" value={inputs} onChange={e => setInputs(e.target.value)} />
      <label htmlFor="fork-outputs">Outputs (JSON)</label>
      <textarea id="fork-outputs" rows={6} spellCheck="false" value={outputs} onChange={e => setOutputs(e.target.value)} />
      <div className="buttons">
        <button type="submit" className="primary">Run the new branch</button>
        <button type="button" onClick={onClose}>Close</button>
      </div>
      <p className="error" role="alert">{error}</p>
      {result ? (
        <p className="ok" role="status">The new branch finished.{' '}
          <a href={route('agents', agentId, 'sessions', result.branch && result.branch !== sessionId ? result.branch : sessionId)}>
            {result.branch && result.branch !== sessionId ? 'Open the new branch as a session' : 'Open the session'}</a>
        </p>) : null}
    </form>
  );
}

export function TracePage({ agentId, sessionId, component, onAuthLost }) {
  const page = useLoad(async () => {
    const agent = await api('GET', `/agents/${enc(agentId)}`);
    const session = await api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}`);
    return { agent, session };
  }, [agentId, sessionId], onAuthLost);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  return <TraceView agent={page.data.agent} session={page.data.session} component={component} />;
}

function TraceView({ agent, session, component }) {
  const agentId = agent.id;
  const sessionId = session.id;
  const dsl = session.dsl || agent.dsl;
  const turn = useTurn(dsl);
  const [trace, setTrace] = useState(null);
  const [error, setError] = useState('');
  const [raw, setRaw] = useState(false);
  const [fork, setFork] = useState(null);
  const [branch, setBranch] = useState(null);        // null: the current branch, else a checkpoint id
  const [messages, setMessages] = useState(session.messages);   // the log: which versions each turn has

  async function load(which = branch) {
    try {
      const at = which ? `&checkpoint_id=${enc(which)}` : '';
      const t = await api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}/trace?branches=true${at}`);
      setTrace(t);
      setError('');
      api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}`).then(s => setMessages(s.messages)).catch(() => {});
      const last = (t.turns || []).at(-1);
      if (last && !turn.running) turn.setStates(statesFromSteps(stepsOfTurn(t.turns, last), dsl, last.status));
    } catch (e) { setError(`The trace is not available: ${plainError(e.message)}`); }
  }
  useEffect(() => {
    document.title = `Trace · ${agent.title} · canvas2graph`;
    load();
    return () => turn.abort();
  }, []);       // eslint-disable-line react-hooks/exhaustive-deps

  const turns = useMemo(() => versionTurns((trace && trace.turns) || []), [trace]);
  const tree = useMemo(() => turnTree(messages), [messages]);
  const openTurn = component ? [...turns].reverse().find(t => (t.steps || []).some(s => s.component_id === component)) : null;
  return (
    <>
      <div className="page-title">
        <h1>Trace · {agent.title}</h1>
        <a className="button" href={route('agents', agentId, 'sessions', sessionId)}>Back to the chat</a>
        <label className="switch"><input type="checkbox" checked={raw} onChange={e => setRaw(e.target.checked)} /> Raw</label>
        <button type="button" onClick={() => load()}>Reload</button>
        <SaveAsTestButton agentId={agentId} sessionId={sessionId} />
      </div>
      <div className="trace-layout">
        <div className="trace-main">
          {fork ? (
            <section className="card fork" aria-labelledby="fork-title">
              <h2 id="fork-title">Run again from here</h2>
              <ForkForm key={`${fork.step.checkpoint_id}-${fork.step.component_id}`} agentId={agentId} sessionId={sessionId}
                turn={fork.turn} step={fork.step} dsl={dsl} play={(...a) => { turn.dispatch({ type: 'clear' }); return turn.play(...a); }}
                setStates={turn.setStates} onDone={() => { setBranch(null); load(null); }} onClose={() => setFork(null)} />
              <Chat items={turn.items} agentId={agentId} label="The new branch" />
            </section>
          ) : null}
          <BranchSwitcher branches={trace && trace.branches} shown={branch}
            onPick={id => { setBranch(id); setFork(null); load(id); }} />
          <div className="turns">
            {error ? <p className="error" role="alert">{error}</p> : null}
            {trace && !turns.length ? <p className="muted">This session has no turns yet.</p> : null}
            {turns.map(t => (
              <TurnView key={t.turn} turn={t} raw={raw} openComponent={openTurn === t ? component : null}
                versions={t.message_id ? versionsOf(tree, t.message_id) : null}
                onFork={(tt, step) => { turn.abort(); setFork({ turn: tt, step }); }}
                onShow={tt => turn.setStates(statesFromSteps(tt.steps || [], dsl, tt.status))} />
            ))}
          </div>
        </div>
        <RunCanvas dsl={dsl} states={turn.states}
          onOpen={id => { location.hash = route('agents', agentId, 'sessions', sessionId, 'trace', id); }} />
      </div>
    </>
  );
}
