// Begin's and UserFillUp's forms as real form fields. RAGFlow's field types: line, paragraph, options,
// integer / float (number), boolean, file (uploaded through /agents/<id>/upload; the value is the list
// of the uploaded files' entries). The answer is {key: {type, value}}, as RAGFlow's clients send it.
import { api } from './api.js';
import { h } from './dom.js';

let counter = 0;

function control(key, field, id) {
  const type = String(field.type || 'line').toLowerCase();
  const required = !field.optional && type !== 'boolean';
  const common = { id, name: key, required };
  if (type === 'paragraph') return h('textarea', { ...common, rows: 4, value: field.value ?? '' });
  if (type === 'options') {
    const options = Array.isArray(field.options) ? field.options : [];
    return h('select', common, h('option', { value: '' }, '(choose)'),
      options.map(o => h('option', { value: String(o), selected: field.value === o }, String(o))));
  }
  if (type === 'integer' || type === 'float' || type === 'number') {
    return h('input', { ...common, type: 'number', step: type === 'integer' ? '1' : 'any', value: field.value ?? '' });
  }
  if (type === 'boolean') return h('input', { ...common, type: 'checkbox', checked: Boolean(field.value) });
  if (type.includes('file')) return h('input', { ...common, type: 'file', multiple: true });
  return h('input', { ...common, type: 'text', value: typeof field.value === 'string' ? field.value : '' });
}

/**
 * A form for `inputs` ({key: {type, name, optional, options, value}}). `onSubmit(answer)` gets
 * {key: {type, value}}; file fields are uploaded first for `agentId`.
 */
export function inputsForm({ title, tips, inputs, agentId, submitLabel = 'Continue', onSubmit }) {
  const fields = Object.entries(inputs || {});
  const formId = `form-${++counter}`;
  const controls = [];
  const rows = fields.map(([key, field]) => {
    const id = `${formId}-${key.replace(/[^\w-]/g, '_')}`;
    const input = control(key, field || {}, id);
    controls.push([key, field || {}, input]);
    const label = h('label', { for: id }, (field && field.name) || key, field && field.optional ? h('span', { class: 'muted' }, ' (optional)') : null);
    const type = String((field && field.type) || 'line').toLowerCase();
    return h('div', { class: `field field-${type}` }, ...(type === 'boolean' ? [input, label] : [label, input]));
  });
  const error = h('p', { class: 'error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'primary' }, submitLabel);
  const form = h('form', { class: 'inputs-form', 'aria-labelledby': `${formId}-title` },
    h('h3', { id: `${formId}-title` }, title),
    tips ? h('p', { class: 'tips' }, tips) : null,
    rows, h('div', { class: 'buttons' }, submit), error);
  form.addEventListener('submit', async event => {
    event.preventDefault();
    submit.disabled = true;
    error.textContent = '';
    try {
      const answer = {};
      for (const [key, field, input] of controls) {
        const type = String(field.type || 'line').toLowerCase();
        let value;
        if (type === 'boolean') value = input.checked;
        else if (type === 'integer' || type === 'float' || type === 'number') value = input.value === '' ? null : Number(input.value);
        else if (type.includes('file')) value = await upload(agentId, input.files);
        else value = input.value;
        answer[key] = { type: field.type || 'line', value };
      }
      for (const [, , input] of controls) input.disabled = true;
      await onSubmit(answer);
    } catch (e) {
      for (const [, , input] of controls) input.disabled = false;
      error.textContent = e.message;
      submit.disabled = false;
    }
  });
  return form;
}

async function upload(agentId, files) {
  if (!files || !files.length) return [];
  const body = new FormData();
  for (const file of files) body.append('file', file, file.name);
  const stored = await api('POST', `/agents/${encodeURIComponent(agentId)}/upload`, body);
  return Array.isArray(stored) ? stored : [stored];
}
