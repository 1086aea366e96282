// Each component's state during a turn, from RAGFlow's events or from a traced turn's steps.
// States: waiting, running (with when it started), done (elapsed), error (message), paused (a form waits),
// cancelled (still running when the turn was cancelled, or stopped by another component's error), and
// skipped (a turn that finished without running it: a branch not taken).
import { markdownText } from './markdown.jsx';
import { componentsOf, seconds, typeOf } from './util.js';

const set = (states, id, state, detail = '', extra = {}) => (id ? { ...states, [id]: { state, detail, ...extra } } : states);

/** The category a Categorize picked (its `category_name` output), kept with its state so the canvas
 * highlights that category's edge only, also when two categories lead to the same component. */
const branchOf = outputs => (outputs && typeof outputs.category_name === 'string' ? { branch: outputs.category_name } : {});

/** The components a form comes from: those still running, else a UserFillUp whose upstream is done
 * (the pause interrupts it before it reports a start). */
function asking(states, dsl) {
  const running = Object.keys(states).filter(id => states[id].state === 'running');
  if (running.length) return running;
  const components = componentsOf(dsl);
  return Object.keys(components).filter(id => typeOf(components[id]) === 'UserFillUp' && !(states[id] && states[id].state !== 'waiting')
    && Object.entries(components).some(([up, cpn]) => ((cpn && cpn.downstream) || []).includes(id) && states[up] && states[up].state === 'done'));
}

/** A component's failure: a cancel that stopped it mid-run (RAGFlow's "Task has been canceled") is no error. */
export const CANCELLED = 'Task has been canceled';
// the detail is one line of text on a box: an error's Markdown (RAGFlow's "**ERROR**: ...") as the text it reads as
const failure = error => (String(error) === CANCELLED ? ['cancelled', ''] : ['error', markdownText(String(error))]);

/** The states after one event. */
export function applyRunEvent(states, event, dsl) {
  const data = event.data || {};
  switch (event.event) {
    case 'workflow_started': return {};
    case 'node_started': return set(states, data.component_id, 'running', '', { startedAt: Date.now() });
    case 'node_finished':
      return data.error ? set(states, data.component_id, ...failure(data.error))
        : set(states, data.component_id, 'done', seconds(data.elapsed_time), branchOf(data.outputs));
    case 'user_inputs':
      return asking(states, dsl).reduce((s, id) => set(s, id, 'paused', 'waiting for the form'), states);
    default: return states;
  }
}

/** The turn ended: what still runs was stopped by a cancel or a failure; a finished turn's untouched
 * components were skipped (a branch not taken). */
export function finishTurn(states, dsl, { cancelled = false, failed = false, paused = false } = {}) {
  const out = { ...states };
  for (const [id, s] of Object.entries(out)) {
    if (s.state !== 'running') continue;
    if (cancelled) out[id] = { state: 'cancelled', detail: '' };
    else if (failed) out[id] = { state: 'cancelled', detail: 'stopped by the error' };
    else if (!paused) out[id] = { state: 'done', detail: '' };
  }
  if (!cancelled && !failed && !paused) {
    for (const id of Object.keys(componentsOf(dsl))) if (!out[id]) out[id] = { state: 'skipped', detail: 'not run this turn' };
  }
  return out;
}

/** The states one traced turn left (its steps from GET .../trace). A step that asked for a form is
 * paused only while its turn still waits: once answered it is done. */
export function statesFromSteps(steps, dsl, status) {
  let states = {};
  const last = steps.at(-1);
  for (const step of steps) {
    if (step.error) states = set(states, step.component_id, ...failure(step.error));
    else if (step.form && status === 'paused' && step === last) states = set(states, step.component_id, 'paused', 'waiting for the form');
    else states = set(states, step.component_id, 'done', seconds(step.elapsed), branchOf(step.outputs));
  }
  if (status === 'finished') states = finishTurn(states, dsl, {});
  return states;
}

/** A turn's steps as the canvas shows them: a fork's run starts at its fork point, so the steps of the
 * turn it forked that ran before that point come first (on the fork's branch that turn holds just those). */
export function stepsOfTurn(turns, turn) {
  const steps = (turn && turn.steps) || [];
  if (!turn || !turn.fork_of) return steps;
  const forked = (turns || []).find(t => t.turn === turn.fork_of && t !== turn);
  return forked ? [...(forked.steps || []), ...steps] : steps;
}
