// The trace panel: every step of every turn of a session (component, inputs, outputs, elapsed, the
// messages sent to the model and its usage, tool calls, errors), and "Run again from here", which forks
// the session from that step's checkpoint (optionally with edited inputs or outputs) and streams the new
// branch; the original branch stays.
import { api } from './api.js';
import { h, clear, pretty, seconds, route } from './dom.js';
import { GraphView } from './graph.js';
import { ChatView } from './chat.js';
import { streamTurn } from './run.js';
import { saveAsTestButton } from './testing.js';

function block(title, value) {
  if (value === undefined || value === null || (typeof value === 'object' && !Object.keys(value).length)) return null;
  return h('div', { class: 'trace-block' }, h('h5', {}, title), h('pre', {}, pretty(value)));
}

function modelMessages(messages) {
  if (!Array.isArray(messages) || !messages.length) return null;
  return h('div', { class: 'trace-block' }, h('h5', {}, 'Messages sent to the model'),
    h('ol', { class: 'model-messages' }, messages.map(m => h('li', {},
      h('span', { class: 'role' }, String((m && (m.role || m.type)) || 'message')),
      h('pre', {}, pretty(m && m.content !== undefined ? m.content : m))))));
}

export async function tracePage(main, agentId, sessionId) {
  const agent = await api('GET', `/agents/${encodeURIComponent(agentId)}`);
  const session = await api('GET', `/agents/${encodeURIComponent(agentId)}/sessions/${encodeURIComponent(sessionId)}`);
  const graph = new GraphView();
  const turnsBox = h('div', { class: 'turns' });
  const forkBox = h('section', { class: 'card fork', 'aria-labelledby': 'fork-title', hidden: true });
  let controller = null;

  async function loadTrace() {
    const trace = await api('GET', `/agents/${encodeURIComponent(agentId)}/sessions/${encodeURIComponent(sessionId)}/trace`);
    clear(turnsBox);
    if (!trace.turns || !trace.turns.length) turnsBox.append(h('p', { class: 'muted' }, 'This session has no turns yet.'));
    for (const turn of trace.turns || []) turnsBox.append(turnSection(turn));
    const last = (trace.turns || []).at(-1);
    if (last && !controller) showTurn(last);
  }

  /** The graph coloured by one turn's steps (a paused step's component as paused). */
  function showTurn(turn) {
    graph.showSteps(turn.steps || []);
  }

  function turnSection(turn) {
    const steps = turn.steps || [];
    return h('section', { class: 'card turn', dataset: { turn: String(turn.turn) }, 'aria-label': `Turn ${turn.turn}` },
      h('h2', {}, `Turn ${turn.turn}`, turn.query ? h('span', { class: 'query' }, `: ${typeof turn.query === 'string' ? turn.query : pretty(turn.query)}`) : null),
      h('p', { class: 'muted' }, `${turn.status || ''} · ${steps.length} step${steps.length === 1 ? '' : 's'}`,
        turn.fork_of ? ` · run again from a step of turn ${turn.fork_of}` : ''),
      h('button', { type: 'button', onclick: () => showTurn(turn) }, `Show turn ${turn.turn} on the graph`),
      h('ol', { class: 'steps' }, steps.map(step => h('li', {}, stepDetails(turn, step)))));
  }

  function stepDetails(turn, step) {
    const failed = Boolean(step.error);
    const details = h('details', { class: `step${failed ? ' failed' : ''}`, dataset: { component: step.component_id || '', step: String(step.step) } },
      h('summary', {},
        h('span', { class: 'step-no' }, `#${step.step}`), ' ',
        h('code', {}, step.component_id || ''), ' ',
        h('span', { class: 'muted' }, [step.component_name, step.component_type].filter(Boolean).join(' · ')), ' ',
        h('span', { class: 'elapsed' }, seconds(step.elapsed)),
        failed ? h('span', { class: 'error' }, ' error') : null),
      h('div', { class: 'step-body' },
        step.error ? h('p', { class: 'error' }, String(step.error)) : null,
        block('Inputs', step.inputs), block('Outputs', step.outputs),
        modelMessages(step.messages), block('Usage', step.usage), block('Tool calls', step.tool_calls),
        block('Waiting for this form', step.form),
        step.checkpoint_id ? h('button', { type: 'button', class: 'primary', onclick: () => forkForm(turn, step) }, 'Run again from here') : null));
    return details;
  }

  function forkForm(turn, step) {
    if (controller) controller.abort();
    controller = null;
    const original = { inputs: pretty(step.inputs || {}), outputs: pretty(step.outputs || {}) };
    const inputs = h('textarea', { id: 'fork-inputs', rows: 6, spellcheck: 'false', value: original.inputs });
    const outputs = h('textarea', { id: 'fork-outputs', rows: 6, spellcheck: 'false', value: original.outputs });
    const error = h('p', { class: 'error', role: 'alert' });
    const chat = new ChatView({ agentId, label: 'The new branch' });
    const result = h('div', { class: 'fork-result' });
    const go = h('button', { type: 'submit', class: 'primary' }, 'Run the new branch');
    const form = h('form', { class: 'fork-form' },
      h('p', {}, `From step #${step.step} of turn ${turn.turn} (`, h('code', {}, step.component_id), '). Edit its inputs or outputs, or leave them as they were; the original branch stays.'),
      h('label', { for: 'fork-inputs' }, 'Inputs (JSON)'), inputs,
      h('label', { for: 'fork-outputs' }, 'Outputs (JSON)'), outputs,
      h('div', { class: 'buttons' }, go, h('button', { type: 'button', onclick: () => { forkBox.hidden = true; } }, 'Close')),
      error);
    form.addEventListener('submit', async event => {
      event.preventDefault();
      error.textContent = '';
      const body = { checkpoint_id: step.checkpoint_id, component_id: step.component_id, stream: true };
      try {
        if (inputs.value.trim() !== original.inputs.trim()) body.inputs = JSON.parse(inputs.value);
        if (outputs.value.trim() !== original.outputs.trim()) body.outputs = JSON.parse(outputs.value);
      } catch (e) {
        error.textContent = `Not JSON: ${e.message}`;
        return;
      }
      go.disabled = true;
      chat.clear();
      clear(result);
      controller = new AbortController();
      let branch = null;
      try {
        await streamTurn({ path: `/agents/${encodeURIComponent(agentId)}/sessions/${encodeURIComponent(sessionId)}/fork`,
          body, graph, chat, signal: controller.signal, onSession: id => { branch = id; } });
        result.append(h('p', { class: 'ok', role: 'status' }, 'The new branch finished. '),
          branch && branch !== sessionId
            ? h('a', { href: route('agents', agentId, 'sessions', branch) }, 'Open the new branch as a session')
            : h('a', { href: route('agents', agentId, 'sessions', sessionId) }, 'Open the session'));
        await loadTrace();
      } catch (e) {
        if (e.name !== 'AbortError') error.textContent = e.message;
      } finally {
        controller = null;
        go.disabled = false;
      }
    });
    clear(forkBox).append(h('h2', { id: 'fork-title' }, 'Run again from here'), form, chat.element, result);
    forkBox.hidden = false;
    forkBox.scrollIntoView({ block: 'nearest' });
    inputs.focus();
  }

  main.append(
    h('div', { class: 'page-title' }, h('h1', {}, `Trace · ${agent.title}`),
      h('a', { class: 'button', href: route('agents', agentId, 'sessions', sessionId) }, 'Back to the chat'),
      h('button', { type: 'button', onclick: () => loadTrace() }, 'Reload'), saveAsTestButton(agentId, sessionId)),
    h('div', { class: 'trace-layout' }, h('div', { class: 'trace-main' }, forkBox, turnsBox), graph.element));
  document.title = `Trace · ${agent.title} · canvas2graph`;
  await Promise.all([graph.load(session.dsl || agent.dsl), loadTrace().catch(e => {
    clear(turnsBox).append(h('p', { class: 'error', role: 'alert' }, `The trace is not available: ${e.message}`));
  })]);
  return { leave: () => controller && controller.abort() };
}
