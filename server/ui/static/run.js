// The run panel: the agent's graph lighting up as its events arrive, the chat streaming the answer,
// Begin / UserFillUp forms, Cancel, and the agent's sessions (reopening one shows its history).
import { api, stream } from './api.js';
import { h, add, clear, notify, route } from './dom.js';
import { GraphView } from './graph.js';
import { ChatView } from './chat.js';
import { diagnosticsTable } from './agents.js';

const CANCELLED = 'Task has been canceled';

function sessionLabel(session) {
  const asked = (session.messages || []).find(m => m.role === 'user' && m.content);
  const when = session.update_date || '';
  return `${asked ? asked.content.slice(0, 40) : session.name || 'Session'} · ${when}`;
}

/** Turn events into the graph, the chat and the page's state; used by runs and by forks. */
export async function streamTurn({ path, body, graph, chat, signal, onSession, onForm }) {
  let cancelled = false;
  let failed = false;
  let paused = false;
  await stream(path, body, event => {
    if (event.event === 'user_inputs') paused = true;
    if ((event.event === 'node_finished' && event.data && event.data.error) || (!event.event && event.code)) failed = true;
    if (event.session_id && onSession) onSession(event.session_id);
    if (event.event === 'workflow_finished' && event.data && event.data.outputs === CANCELLED) {
      cancelled = true;
      chat.notice('The turn was cancelled.', 'warning');
    }
    graph.apply(event);
    chat.apply(event, onForm);
  }, signal);
  graph.finish({ cancelled, failed });
  return { cancelled, failed, paused };
}

export async function runPage(main, agentId, sessionId) {
  const agent = await api('GET', `/agents/${encodeURIComponent(agentId)}`);
  const session = sessionId ? await api('GET', `/agents/${encodeURIComponent(agentId)}/sessions/${encodeURIComponent(sessionId)}`) : null;
  const dsl = (session && session.dsl) || agent.dsl;
  const begin = ((dsl.components || {}).begin || {}).obj || {};
  const beginParams = begin.params || {};
  const beginInputs = beginParams.inputs && typeof beginParams.inputs === 'object' ? beginParams.inputs : {};

  const graph = new GraphView();
  const chat = new ChatView({ agentId });
  const sessions = h('ul', { class: 'sessions-list' });
  const traceLink = h('a', { class: 'button', hidden: true }, 'Trace of this session');
  const status = h('p', { class: 'run-status muted', role: 'status' }, '');
  const query = h('textarea', { id: 'query', rows: 2, placeholder: 'Ask the agent…' });
  const send = h('button', { type: 'submit', class: 'primary' }, 'Send');
  const cancel = h('button', { type: 'button', class: 'danger', disabled: true }, 'Cancel');
  const composer = h('form', { class: 'composer', 'aria-label': 'Chat input' },
    h('label', { for: 'query' }, 'Your message'), query, h('div', { class: 'buttons' }, send, cancel));
  let controller = null;
  let beginForm = null;

  function setSession(id) {
    if (sessionId === id) return;
    sessionId = id;
    history.replaceState(null, '', route('agents', agentId, 'sessions', id));
    showTrace();
    loadSessions();
  }
  function showTrace() {
    traceLink.href = route('agents', agentId, 'sessions', sessionId, 'trace');
    traceLink.hidden = !sessionId;
  }

  async function loadSessions() {
    const list = await api('GET', `/agents/${encodeURIComponent(agentId)}/sessions?dsl=false&page_size=50`).catch(() => []);
    clear(sessions).append(
      h('li', {}, h('a', { href: route('agents', agentId), 'aria-current': sessionId ? null : 'page' }, '+ New session')),
      ...list.map(s => h('li', {}, h('a', { href: route('agents', agentId, 'sessions', s.id), 'aria-current': s.id === sessionId ? 'page' : null,
        dataset: { sessionId: s.id } }, sessionLabel(s)))));
  }

  function showForm(inputs, tips) {
    chat.form({ title: 'The agent asks', tips, inputs, submitLabel: 'Send answer',
      onSubmit: answer => run('', answer) });
  }

  async function run(text, inputs) {
    if (controller) return;
    controller = new AbortController();
    send.disabled = true;
    cancel.disabled = false;
    status.textContent = 'Running…';
    if (text) chat.message('user', text);
    else if (inputs) chat.message('user', Object.entries(inputs).map(([k, v]) => `${k}: ${Array.isArray(v.value) ? v.value.map(f => f.name || f.id).join(', ') : v.value}`).join('\n'));
    const body = { agent_id: agentId, query: text, stream: true };
    if (sessionId) body.session_id = sessionId;
    if (inputs) body.inputs = inputs;
    try {
      const outcome = await streamTurn({ path: '/agents/chat/completions', body, graph, chat, signal: controller.signal,
        onSession: setSession, onForm: showForm });
      const { cancelled, failed, paused } = outcome;
      status.textContent = cancelled ? 'Cancelled.' : failed ? 'Finished with an error.'
        : paused ? 'Paused: the agent waits for your answer to its form.' : 'Finished.';
    } catch (e) {
      if (e.name !== 'AbortError') {
        chat.notice(e.message, 'error');
        status.textContent = 'Failed.';
      }
      throw e;
    } finally {
      controller = null;
      send.disabled = false;
      cancel.disabled = true;
    }
  }

  composer.addEventListener('submit', async event => {
    event.preventDefault();
    if (beginForm && document.contains(beginForm) && !beginForm.dataset.sent) {
      beginForm.requestSubmit();
      return;
    }
    const text = query.value;
    if (!text.trim()) { query.focus(); return; }
    query.value = '';
    try { await run(text); } catch { /* shown in the chat */ }
  });
  query.addEventListener('keydown', event => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  cancel.addEventListener('click', async () => {
    if (!sessionId) return;
    cancel.disabled = true;
    try {
      await api('POST', `/tasks/${encodeURIComponent(sessionId)}/cancel`);
      status.textContent = 'Cancelling…';
    } catch (e) { notify(e.message, 'error'); }
  });

  // the history, or a new session's greeting and Begin form
  if (session) {
    for (const m of session.messages || []) {
      if (m.role === 'user' && !m.content) chat.message('user', '(answered a form)');
      else if (m.role === 'assistant' && !m.content) chat.message('assistant', '(no answer: the turn paused or ended without a message)');
      else chat.message(m.role, m.content, m.reference);
    }
    // a session paused for a form shows the form again (the trace knows what the paused step waits for)
    api('GET', `/agents/${encodeURIComponent(agentId)}/sessions/${encodeURIComponent(sessionId)}/trace`).then(trace => {
      const last = (trace.turns || []).at(-1);
      if (!last || controller) return;
      graph.showSteps(last.steps || []);          // the graph as the last turn left it
      const step = last.status === 'paused' && (last.steps || []).at(-1);
      if (!step) return;
      // the form as the pause asked it, else as the DSL declares it (without the tips, which are rendered at run time)
      const declared = (((dsl.components || {})[step.component_id] || {}).obj || {}).params || {};
      const form = step.form || { inputs: declared.inputs || {} };
      graph.set(step.component_id, 'paused', 'waiting for the form');
      showForm(form.inputs || {}, form.tips || '');
    }).catch(() => {});
  } else {
    if (beginParams.prologue) chat.message('assistant', beginParams.prologue);
    if (Object.keys(beginInputs).length) {
      beginForm = chat.form({ title: 'Before you start', inputs: beginInputs, submitLabel: 'Start',
        onSubmit: async answer => {
          beginForm.dataset.sent = '1';
          const text = query.value;
          query.value = '';
          await run(text, answer);
        } });
    }
  }

  add(main,
    h('div', { class: 'page-title' }, h('h1', {}, agent.title), traceLink,
      h('a', { href: route('agents', agentId, 'evaluations'), class: 'button' }, 'Evaluations'),
      h('a', { href: '#/agents', class: 'button' }, 'All agents')),
    agent.compiles === false && !session
      ? h('section', { class: 'card', 'aria-labelledby': 'problems-title' },
        h('h2', { id: 'problems-title', class: 'error' }, 'This agent does not compile: fix its DSL before running it'),
        diagnosticsTable(agent.diagnostics))
      : null,
    h('div', { class: 'run-layout' },
      h('nav', { class: 'card sessions', 'aria-labelledby': 'sessions-title' }, h('h2', { id: 'sessions-title' }, 'Sessions'), sessions),
      h('section', { class: 'card chat', 'aria-labelledby': 'chat-title' }, h('h2', { id: 'chat-title' }, 'Chat'), chat.element, status, composer),
      graph.element));
  showTrace();
  document.title = `${agent.title} · canvas2graph`;
  await Promise.all([graph.load(dsl), loadSessions()]);
  if (!beginForm) query.focus();
  return { leave: () => controller && controller.abort() };
}
