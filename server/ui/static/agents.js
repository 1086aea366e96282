// The agents panel: list, create (paste, upload or a template; checked before saving, with every
// diagnostic shown against the component and field it names), rename, delete, download the DSL.
import { api, saveBlob } from './api.js';
import { h, add, clear, notify, route, titleText } from './dom.js';

/** The diagnostics of a check as a table: component, field, problem (severity in words and colour). */
export function diagnosticsTable(diagnostics) {
  if (!diagnostics || !diagnostics.length) return null;
  return h('table', { class: 'diagnostics', 'aria-label': 'Diagnostics' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Severity'), h('th', { scope: 'col' }, 'Component'),
      h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Problem'))),
    h('tbody', {}, diagnostics.map(d => h('tr', { class: `severity-${d.severity}`, dataset: { component: d.component_id || '', field: d.field || '' } },
      h('td', {}, d.severity || ''), h('td', {}, h('code', {}, d.component_id || '(canvas)')),
      h('td', {}, h('code', {}, d.field || '')), h('td', {}, d.message || d.code || '')))));
}

function agentRow(agent, reload) {
  const titleCell = h('td', {}, h('a', { href: route('agents', agent.id), class: 'agent-link' }, agent.title));
  const actions = h('td', { class: 'actions' });
  const row = h('tr', { dataset: { agentId: agent.id } }, titleCell,
    h('td', {}, agent.update_date || ''), actions);

  function showActions() {
    clear(actions).append(
      h('button', { type: 'button', onclick: rename, 'aria-label': `Rename ${agent.title}` }, 'Rename'),
      h('button', { type: 'button', onclick: downloadDsl, 'aria-label': `Download the DSL of ${agent.title}` }, 'Download DSL'),
      h('button', { type: 'button', class: 'danger', onclick: askDelete, 'aria-label': `Delete ${agent.title}` }, 'Delete'));
  }

  function rename() {
    const input = h('input', { type: 'text', value: agent.title, 'aria-label': 'New title', required: true });
    const form = h('form', { class: 'inline' }, input, h('button', { type: 'submit', class: 'primary' }, 'Save'),
      h('button', { type: 'button', onclick: () => { titleCell.replaceChildren(h('a', { href: route('agents', agent.id) }, agent.title)); showActions(); } }, 'Cancel'));
    form.addEventListener('submit', async event => {
      event.preventDefault();
      try {
        await api('PUT', `/agents/${encodeURIComponent(agent.id)}`, { title: input.value });
        notify(`Renamed to ${input.value}.`);
        reload();
      } catch (e) { notify(e.message, 'error'); }
    });
    clear(titleCell).append(form);
    clear(actions);
    input.focus();
    input.select();
  }

  function downloadDsl() {
    const blob = new Blob([JSON.stringify(agent.dsl, null, 2)], { type: 'application/json' });
    saveBlob(blob, `${agent.title.replace(/[^\w.-]+/g, '_') || 'agent'}.json`);
  }

  function askDelete() {
    const yes = h('button', { type: 'button', class: 'danger', onclick: async () => {
      try {
        await api('DELETE', `/agents/${encodeURIComponent(agent.id)}`);
        notify(`Deleted ${agent.title}.`);
        reload();
      } catch (e) { notify(e.message, 'error'); }
    } }, 'Yes, delete');
    clear(actions).append(h('span', {}, `Delete “${agent.title}” and its sessions? `), yes,
      h('button', { type: 'button', onclick: showActions }, 'Keep'));
    yes.focus();
  }

  showActions();
  return row;
}

function createForm(templates, reload) {
  const title = h('input', { id: 'new-title', type: 'text', required: true, autocomplete: 'off' });
  const templateSelect = h('select', { id: 'new-template' }, h('option', { value: '' }, '(none)'),
    templates.map((t, i) => h('option', { value: String(i) }, titleText(t.title, t.name || t.id))));
  const file = h('input', { id: 'new-file', type: 'file', accept: '.json,application/json' });
  const dsl = h('textarea', { id: 'new-dsl', rows: 12, spellcheck: 'false', required: true,
    placeholder: '{"components": {"begin": …}}' });
  const result = h('div', { class: 'check-result', 'aria-live': 'polite' });

  templateSelect.addEventListener('change', () => {
    const t = templates[Number(templateSelect.value)];
    if (!t) return;
    dsl.value = JSON.stringify(t.dsl, null, 2);
    if (!title.value) title.value = titleText(t.title, t.name || '');
    clear(result);
  });
  file.addEventListener('change', async () => {
    const chosen = file.files[0];
    if (!chosen) return;
    dsl.value = await chosen.text();
    if (!title.value) title.value = chosen.name.replace(/\.json$/i, '');
    clear(result);
    await check();
  });

  async function check() {
    clear(result);
    if (!dsl.value.trim()) {
      result.append(h('p', { class: 'error', role: 'alert' }, 'Paste a DSL, upload a file or pick a template first.'));
      return false;
    }
    let verdict;
    try {
      verdict = await api('POST', '/graphs/compile', { dsl: dsl.value });
    } catch (e) {
      add(result, h('p', { class: 'error', role: 'alert' }, e.message), diagnosticsTable(e.data && e.data.diagnostics));
      return false;
    }
    const errors = verdict.diagnostics.filter(d => d.severity === 'error').length;
    add(result, h('p', { class: errors ? 'error' : 'ok', role: errors ? 'alert' : 'status' },
      errors ? `${errors} error${errors > 1 ? 's' : ''}: fix ${errors > 1 ? 'them' : 'it'} before saving.`
        : `The DSL compiles${verdict.diagnostics.length ? ' (with warnings)' : ''}.`),
    diagnosticsTable(verdict.diagnostics));
    return verdict.ok;
  }

  const form = h('form', { class: 'card create', 'aria-labelledby': 'create-title' },
    h('h2', { id: 'create-title' }, 'New agent'),
    h('div', { class: 'fields' },
      h('div', {}, h('label', { for: 'new-title' }, 'Title'), title),
      h('div', {}, h('label', { for: 'new-template' }, 'Start from a template'), templateSelect),
      h('div', {}, h('label', { for: 'new-file' }, 'Or upload a DSL file'), file)),
    h('label', { for: 'new-dsl' }, 'DSL (JSON)'), dsl,
    h('div', { class: 'buttons' },
      h('button', { type: 'button', onclick: check }, 'Check'),
      h('button', { type: 'submit', class: 'primary' }, 'Save agent')),
    result);
  form.addEventListener('submit', async event => {
    event.preventDefault();
    if (!title.value.trim()) { title.focus(); return; }
    if (!(await check())) return;
    try {
      const agent = await api('POST', '/agents', { title: title.value.trim(), dsl: dsl.value });
      notify(`Saved ${agent.title}.`);
      form.reset();
      clear(result);
      reload(agent.id);
    } catch (e) {
      result.append(h('p', { class: 'error', role: 'alert' }, e.message));
    }
  });
  return form;
}

export async function agentsPage(main) {
  const [list, templates] = await Promise.all([api('GET', '/agents?page_size=100'), api('GET', '/agents/templates').catch(() => [])]);
  const tbody = h('tbody');
  const table = h('table', { class: 'agents' },
    h('caption', {}, 'Your agents'),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Title'), h('th', { scope: 'col' }, 'Updated'),
      h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
    tbody);
  const empty = h('p', { class: 'muted' }, 'No agents yet: create one below.');

  async function reload() {
    const fresh = await api('GET', '/agents?page_size=100');
    fill(fresh.canvas);
  }
  function fill(agents) {
    clear(tbody).append(...agents.map(a => agentRow(a, reload)));
    empty.hidden = agents.length > 0;
    table.hidden = agents.length === 0;
  }
  fill(list.canvas);
  main.append(h('h1', {}, 'Agents'), h('section', { class: 'card' }, table, empty), createForm(templates, reload));
  document.title = 'Agents · canvas2graph';
  return {};
}
