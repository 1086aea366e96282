// A component's step in a drawer over the run view's graph, beside the chat: what it was given, what it
// gave, its prompt, tokens, time and error, as the trace page shows a step (trace.jsx's StepView), with a
// link to the whole trace. Escape or the close button closes it.
import { useEffect, useRef, useState } from 'react';
import { api } from './api.js';
import { versionTurns } from './branches.js';
import { Markdown } from './markdown.jsx';
import { feedsFailure, StepView } from './trace.jsx';
import { plainError, route } from './util.js';
import './stepdrawer.css';

const enc = encodeURIComponent;

/** The newest step of `componentId` on the session's current branch, with its turn as the chat numbers
 * it: {turn, step, index} (a fork's turn holds the steps before its fork point too, as the canvas shows). */
export function latestStep(turns, componentId) {
  for (const turn of versionTurns(turns).reverse()) {
    const steps = turn.steps || [];
    for (let i = steps.length - 1; i >= 0; i--) {
      if (steps[i].component_id === componentId) return { turn, step: steps[i], index: i };
    }
  }
  return null;
}

/**
 * The drawer of `componentId`'s step in `sessionId` (none yet: says to run the agent first). `version`
 * changes when a turn ends, to read the step again; `running`: the component runs now (its step comes at
 * its end); `onClose()` closes it.
 */
export function StepDrawer({ agentId, sessionId, componentId, version, running = false, onClose }) {
  const [found, setFound] = useState({ loading: true });
  const close = useRef(null);
  const titleId = 'step-drawer-title';

  useEffect(() => {
    if (!sessionId) { setFound({ none: true }); return undefined; }
    let live = true;
    setFound(f => ({ ...f, loading: true }));
    api('GET', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}/trace`)
      .then(trace => live && setFound({ step: latestStep(trace.turns, componentId) }))
      .catch(e => live && setFound({ error: `The step is not available: ${plainError(e.message)}` }));
    return () => { live = false; };
  }, [agentId, sessionId, componentId, version]);

  // the focus goes to the drawer, and back to where it was when the drawer closes
  useEffect(() => {
    const before = document.activeElement;
    return () => { if (before && before !== document.body && document.contains(before)) before.focus({ preventScroll: true }); };
  }, []);
  useEffect(() => {
    if (close.current) close.current.focus({ preventScroll: true });
    const leave = event => { if (event.key === 'Escape') { event.stopPropagation(); onClose(); } };
    document.addEventListener('keydown', leave);
    return () => document.removeEventListener('keydown', leave);
  }, [componentId]);      // eslint-disable-line react-hooks/exhaustive-deps

  const traceLink = sessionId ? route('agents', agentId, 'sessions', sessionId, 'trace', componentId) : null;
  let body;
  if (found.none) body = <p className="muted">Run the agent first: a component has a step once it ran.</p>;
  else if (found.error) body = <p className="error" role="alert">{found.error}</p>;
  else if (found.step) {
    const { turn, step, index } = found.step;
    // a model's failure shows in the Message streaming its answer: said here, where the model's step is
    const next = feedsFailure(turn.steps, index) ? turn.steps[index + 1] : null;
    body = (<>
      {next ? (
        <div className="step-failed-later">
          <p>Its answer failed while <code>{next.component_id}</code> streamed it:</p>
          <Markdown text={String(next.error)} className="error step-error markdown" />
        </div>
      ) : null}
      <StepView turn={turn} step={step} index={index} raw={false} open scroll={false} onFork={() => { location.hash = traceLink; }} />
    </>);
  } else if (!found.loading) body = <p className="muted">{componentId} did not run in this session (on its current branch).</p>;
  else body = <p className="muted">Loading the step…</p>;

  return (
    <aside className="step-drawer" role="dialog" aria-modal="false" aria-labelledby={titleId}>
      <div className="step-drawer-head">
        <h3 id={titleId}>Step of {componentId}</h3>
        <button ref={close} type="button" aria-label="Close the step" title="Close (Escape)" onClick={onClose}>×</button>
      </div>
      <p className="step-drawer-turn">
        {found.step ? <span className="muted">Turn {found.step.turn.turn}, step {found.step.index + 1} · </span> : null}
        {traceLink ? <a href={traceLink}>Open the full trace</a> : null}
      </p>
      {running ? <p className="paused-tag" role="status">{componentId} is running: its step shows here when it ends.</p> : null}
      {body}
    </aside>
  );
}
