// Begin's and UserFillUp's forms as real form fields. RAGFlow's field types: line, paragraph, options,
// integer / float (number), boolean, file (uploaded through /agents/<id>/upload; the value is the list
// of the uploaded files' entries). The answer is {key: {type, value}}, as RAGFlow's clients send it.
import { useEffect, useId, useRef, useState } from 'react';
import { api } from './api.js';
import { Markdown } from './markdown.jsx';
import { plainError } from './util.js';

const kind = field => String((field && field.type) || 'line').toLowerCase();
const isNumber = type => type === 'integer' || type === 'float' || type === 'number';

/** A field's label: its name, else its key made readable ("user_name" -> "User name"). */
export function fieldLabel(key, field) {
  if (field && field.name) return field.name;
  const words = String(key).replace(/[_-]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function Control({ id, name, field, disabled }) {
  const type = kind(field);
  const common = { id, name, disabled, required: !field.optional && type !== 'boolean' };
  if (type === 'paragraph') return <textarea {...common} rows={4} defaultValue={field.value ?? ''} />;
  if (type === 'options') {
    const options = Array.isArray(field.options) ? field.options : [];
    return (
      <select {...common} defaultValue={options.includes(field.value) ? String(field.value) : ''}>
        <option value="">(choose)</option>
        {options.map(o => <option key={String(o)} value={String(o)}>{String(o)}</option>)}
      </select>
    );
  }
  if (isNumber(type)) return <input {...common} type="number" step={type === 'integer' ? '1' : 'any'} defaultValue={field.value ?? ''} />;
  if (type === 'boolean') return <input {...common} type="checkbox" defaultChecked={Boolean(field.value)} />;
  if (type.includes('file')) return <input {...common} type="file" multiple />;
  return <input {...common} type="text" defaultValue={typeof field.value === 'string' ? field.value : ''} />;
}

async function upload(agentId, files) {
  if (!files || !files.length) return [];
  const body = new FormData();
  for (const file of files) body.append('file', file, file.name);
  const stored = await api('POST', `/agents/${encodeURIComponent(agentId)}/upload`, body);
  return Array.isArray(stored) ? stored : [stored];
}

/**
 * The fields of `inputs` ({key: {type, name, optional, options, value}}), each named by its key, with
 * `value` as what it starts with: the fields of a form, without the form (InputsForm, and the schedule
 * form's Begin inputs in schedules.jsx). Read them back with readInputs.
 */
export function InputFields({ inputs, idPrefix, disabled = false }) {
  return Object.entries(inputs || {}).map(([key, field]) => {
    const f = field || {};
    const id = `${idPrefix}-${key.replace(/[^\w-]/g, '_')}`;
    const label = <label htmlFor={id}>{fieldLabel(key, f)}{f.optional ? <span className="muted"> (optional)</span> : null}</label>;
    const control = <Control id={id} name={key} field={f} disabled={disabled} />;
    return <div key={key} className={`field field-${kind(f)}`}>{kind(f) === 'boolean' ? <>{control}{label}</> : <>{label}{control}</>}</div>;
  });
}

/** The answer of the InputFields inside `container` (a form or a fieldset): {key: {type, value}}, as
 * RAGFlow's clients send it; file fields are uploaded first for `agentId`. */
export async function readInputs(container, inputs, agentId) {
  const answer = {};
  for (const [key, field] of Object.entries(inputs || {})) {
    const input = container.elements.namedItem(key);
    const type = kind(field);
    let value;
    if (type === 'boolean') value = input.checked;
    else if (isNumber(type)) value = input.value === '' ? null : Number(input.value);
    else if (type.includes('file')) value = await upload(agentId, input.files);
    else value = input.value;
    answer[key] = { type: (field && field.type) || 'line', value };
  }
  return answer;
}

/**
 * A form for `inputs` ({key: {type, name, optional, options, value}}). `onSubmit(answer)` gets
 * {key: {type, value}}; file fields are uploaded first for `agentId`. `done` shows it answered (disabled).
 * `tips` (a UserFillUp's) is Markdown, as RAGFlow writes them.
 */
export function InputsForm({ title, tips, inputs, agentId, submitLabel = 'Continue', onSubmit, done = false, autoFocus = true }) {
  const formId = useId().replace(/:/g, '');
  const formRef = useRef(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');

  useEffect(() => {
    if (!autoFocus || done) return;
    const first = formRef.current && formRef.current.querySelector('input, textarea, select');
    if (first) first.focus();
  }, [autoFocus, done]);

  async function submit(event) {
    event.preventDefault();
    setBusy(true);
    setError('');
    try {
      await onSubmit(await readInputs(formRef.current, inputs, agentId));
    } catch (e) {
      setError(plainError(e.message));
      setBusy(false);
    }
  }

  const disabled = busy || done;
  return (
    <form ref={formRef} className="inputs-form" aria-labelledby={`${formId}-title`} onSubmit={submit}>
      <h3 id={`${formId}-title`}>{title}</h3>
      {tips ? <Markdown text={tips} className="tips markdown" /> : null}
      <InputFields inputs={inputs} idPrefix={formId} disabled={disabled} />
      <div className="buttons">
        <button type="submit" className="primary" disabled={disabled}>{done ? 'Answered' : submitLabel}</button>
      </div>
      <p className="error" role="alert">{error}</p>
    </form>
  );
}
