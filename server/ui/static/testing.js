// Testing an agent from the inspector (docs/testing.md):
//   "Save as test": a session's regression case folder, zipped (POST .../sessions/<sid>/record), for
//   `canvas2graph test`;
//   #/agents/<id>/evaluations: run the agent (a version of it, or two to compare) over an uploaded
//   dataset, list its evaluations, read one's rows with their scores, compare two row by row.
// Self-contained: the trace page adds the button, the run page links the evaluations, app.js routes them.
import { api, request, saveBlob, ApiError } from './api.js';
import { h, clear, notify, pretty, route } from './dom.js';

const enc = encodeURIComponent;
const POLL_MS = 1000;

/** A button that downloads the session as a case folder (a zip). */
export function saveAsTestButton(agentId, sessionId) {
  const button = h('button', { type: 'button' }, 'Save as test');
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const response = await request('POST', `/agents/${enc(agentId)}/sessions/${enc(sessionId)}/record`);
      if (!response.ok) {
        const reply = await response.json().catch(() => ({}));
        throw new ApiError(reply.message || `HTTP ${response.status}`, { status: response.status });
      }
      const found = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') || '');
      const name = found ? found[1] : 'case.zip';
      saveBlob(await response.blob(), name);
      notify(`Saved ${name}: unzip it and run "canvas2graph test" on the folder.`);
    } catch (e) {
      notify(`Cannot save the test: ${e.message}`, 'error');
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

function score(value) {
  return value === null || value === undefined ? '–' : String(Math.round(value * 1000) / 1000);
}

function summaryLine(summary) {
  if (!summary) return '';
  if (summary.changed !== undefined) return `two versions: ${summary.changed} of ${summary.rows} rows changed`;
  const latency = summary.latency_ms || {};
  const cost = summary.cost === null || summary.cost === undefined ? 'not priced' : `$${summary.cost.toFixed(6)}`;
  return `score ${score(summary.score)} · ${summary.passed}/${summary.rows} passed · ` +
    `${(summary.tokens || {}).total_tokens || 0} tokens · cost ${cost} · p50 ${Math.round(latency.p50 || 0)} ms, ` +
    `p95 ${Math.round(latency.p95 || 0)} ms`;
}

function rowsTable(rows) {
  return h('table', { class: 'evaluation-rows' },
    h('thead', {}, h('tr', {}, ['Row', 'Query', 'Expected', 'Answer', 'Score', 'Status'].map(t => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map(r => h('tr', { class: r.score === 1 ? 'pass' : (r.score === null ? '' : 'fail') },
      h('td', {}, String(r.row)), h('td', {}, h('pre', {}, pretty(r.query))), h('td', {}, h('pre', {}, pretty(r.expected))),
      h('td', {}, h('pre', {}, pretty(r.answer))), h('td', { title: r.reason || '' }, score(r.score)),
      h('td', {}, r.error ? `${r.status}: ${r.error}` : String(r.status))))));
}

function changedTable(comparison) {
  if (!comparison.changed.length) return h('p', { class: 'muted' }, 'No row changed.');
  return h('table', { class: 'evaluation-rows' },
    h('thead', {}, h('tr', {}, ['Row', 'Query', 'Change', 'A: answer', 'A', 'B: answer', 'B'].map(t => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, comparison.changed.map(c => h('tr', { class: c.change === 'worse' ? 'fail' : (c.change === 'better' ? 'pass' : '') },
      h('td', {}, String(c.row)), h('td', {}, h('pre', {}, pretty(c.query))), h('td', {}, c.change),
      h('td', {}, h('pre', {}, pretty(c.a.answer))), h('td', {}, score(c.a.score)),
      h('td', {}, h('pre', {}, pretty(c.b.answer))), h('td', {}, score(c.b.score))))));
}

function comparisonView(comparison, title) {
  const s = comparison.summary;
  return [h('h2', {}, title), h('p', {}, `${s.changed} of ${s.rows} rows changed: ${s.better} better, ${s.worse} worse.`),
    h('p', { class: 'muted' }, `A: ${comparison.a.dsl} · ${summaryLine(comparison.a.summary)}`),
    h('p', { class: 'muted' }, `B: ${comparison.b.dsl} · ${summaryLine(comparison.b.summary)}`),
    changedTable(comparison)];
}

function versionSelect(id, versions, empty) {
  return h('select', { id, name: id }, h('option', { value: '' }, empty),
    versions.map(v => h('option', { value: v.id }, `${v.title || v.id}${v.release ? ' (published)' : ''} · ${v.update_date || ''}`)));
}

/** The evaluations page. */
export async function evaluationsPage(main, agentId) {
  const agent = await api('GET', `/agents/${enc(agentId)}`);
  const versions = await api('GET', `/agents/${enc(agentId)}/versions`);
  const list = h('tbody', {});
  const detail = h('section', { class: 'card', 'aria-live': 'polite', 'aria-label': 'Evaluation' });
  const error = h('p', { class: 'error', role: 'alert' });
  let timer = null;
  let left = false;

  const file = h('input', { id: 'dataset', name: 'file', type: 'file', accept: '.csv,.jsonl', required: true });
  const metric = h('select', { id: 'metric', name: 'metric' },
    ['contains', 'exact', 'regex', 'json', 'judge'].map(m => h('option', { value: m }, m)));
  const judge = h('input', { id: 'judge', name: 'judge', placeholder: 'model@Factory (for judge)', spellcheck: 'false' });
  const version = versionSelect('version_id', versions, 'the current DSL');
  const compare = versionSelect('compare_version_id', versions, 'no comparison');
  const form = h('form', { class: 'card evaluation-form', 'aria-labelledby': 'new-evaluation' },
    h('h2', { id: 'new-evaluation' }, 'New evaluation'),
    h('label', { for: 'dataset' }, 'Dataset (CSV or JSONL: columns query, expected, and Begin inputs)'), file,
    h('label', { for: 'metric' }, 'Metric'), metric, h('label', { for: 'judge' }, 'Judge model'), judge,
    h('label', { for: 'version_id' }, 'Version'), version, h('label', { for: 'compare_version_id' }, 'Compare with'), compare,
    h('button', { type: 'submit', class: 'primary' }, 'Run'), error);
  form.addEventListener('submit', async event => {
    event.preventDefault();
    error.textContent = '';
    const body = new FormData(form);
    try {
      const created = await api('POST', `/agents/${enc(agentId)}/evaluations`, body);
      notify(`Evaluation started over ${created.rows} rows.`);
      await load(created.id);
    } catch (e) {
      error.textContent = e.message;
    }
  });

  async function show(id) {
    const evaluation = await api('GET', `/agents/${enc(agentId)}/evaluations/${enc(id)}`);
    clear(detail).append(h('h2', {}, `Evaluation ${evaluation.id.slice(0, 8)} · ${evaluation.dataset}`),
      h('p', { class: 'muted' }, `${evaluation.status} · metric ${evaluation.metric}${evaluation.judge ? ` (judge ${evaluation.judge})` : ''}`));
    if (evaluation.error) detail.append(h('p', { class: 'error' }, evaluation.error));
    const report = evaluation.report;
    if (report && report.format === 'canvas2graph-eval-comparison') detail.append(...comparisonView(report, 'Two versions'));
    else if (report) detail.append(h('p', {}, summaryLine(report.summary)), rowsTable(report.rows));
    return evaluation.status;
  }

  async function compareTwo(a, b) {
    try {
      const comparison = await api('GET', `/agents/${enc(agentId)}/evaluations/${enc(a)}/compare/${enc(b)}`);
      clear(detail).append(...comparisonView(comparison, 'Comparison'));
    } catch (e) {
      notify(e.message, 'error');
    }
  }

  async function load(openId) {
    clearTimeout(timer);
    const evaluations = await api('GET', `/agents/${enc(agentId)}/evaluations`);
    const picked = [];
    clear(list).append(...evaluations.map(e => {
      const pick = h('input', { type: 'checkbox', 'aria-label': `Compare evaluation ${e.id.slice(0, 8)}` });
      pick.addEventListener('change', () => {
        if (pick.checked) picked.push(e.id); else picked.splice(picked.indexOf(e.id), 1);
        if (picked.length === 2) compareTwo(picked[0], picked[1]);
      });
      return h('tr', { dataset: { evaluation: e.id } }, h('td', {}, pick),
        h('td', {}, h('button', { type: 'button', class: 'link', onclick: () => show(e.id) }, e.id.slice(0, 8))),
        h('td', {}, e.dataset), h('td', {}, e.metric),
        h('td', {}, e.progress ? `${e.status} (${e.progress.done}/${e.progress.total} rows)` : e.status),
        h('td', {}, summaryLine(e.summary)));
    }));
    if (openId) await show(openId);
    if (!left && evaluations.some(e => e.status === 'running')) timer = setTimeout(() => load(openId), POLL_MS);
  }

  main.append(
    h('div', { class: 'page-title' }, h('h1', {}, `Evaluations · ${agent.title}`),
      h('a', { class: 'button', href: route('agents', agentId) }, 'Back to the agent')),
    form,
    h('section', { class: 'card', 'aria-labelledby': 'evaluations-title' }, h('h2', { id: 'evaluations-title' }, 'Evaluations'),
      h('p', { class: 'muted' }, 'Tick two to compare them row by row.'),
      h('table', { class: 'evaluations' },
        h('thead', {}, h('tr', {}, ['Compare', 'Id', 'Dataset', 'Metric', 'Status', 'Summary'].map(t => h('th', { scope: 'col' }, t)))),
        list)),
    detail);
  document.title = `Evaluations · ${agent.title} · canvas2graph`;
  await load(null);
  return { leave: () => { left = true; clearTimeout(timer); } };
}
