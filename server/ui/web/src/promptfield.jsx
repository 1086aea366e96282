// The prompt fields of an LLM or Agent and a Message's replies, edited as lists instead of JSON: `prompts`
// is a list of messages (a role, and content with references inserted from the picker), a Message's
// `content` a list of replies (RAGFlow sends one of them, picked at random). Rows are added, removed
// and moved; each content is a RefText (refeditor.jsx).
import { RefText } from './refeditor.jsx';

const ROLES = ['user', 'assistant'];

/** `prompts` as RAGFlow keeps them: [{role, content}] (a string is one user message, as the engine reads it). */
export function promptsOf(value) {
  if (typeof value === 'string') return [{ role: 'user', content: value }];
  return Array.isArray(value) ? value.map(p => (p && typeof p === 'object' ? p : { role: 'user', content: String(p ?? '') })) : [];
}

const move = (list, i, by) => {
  const j = i + by;
  if (j < 0 || j >= list.length) return list;
  const out = [...list];
  [out[i], out[j]] = [out[j], out[i]];
  return out;
};

function RowButtons({ i, count, what, onMove, onRemove, removable = true }) {
  return (
    <span className="row-buttons">
      <button type="button" onClick={() => onMove(i, -1)} disabled={i === 0} aria-label={`Move ${what} up`}>↑</button>
      <button type="button" onClick={() => onMove(i, 1)} disabled={i === count - 1} aria-label={`Move ${what} down`}>↓</button>
      {removable ? <button type="button" className="danger" onClick={() => onRemove(i)} aria-label={`Remove ${what}`}>Remove</button> : null}
    </span>
  );
}

/** An LLM's / Agent's `prompts`: a list of messages, each a role and its content. */
export function PromptsField({ value, onChange, prefix, problems = [] }) {
  const prompts = promptsOf(value);
  const set = (i, p) => onChange(prompts.map((q, j) => (j === i ? p : q)));
  return (
    <fieldset className="rows-field prompts-field" data-field="params.prompts">
      <legend>Messages <code className="key">prompts</code></legend>
      {prompts.map((p, i) => {
        const id = `${prefix}-prompt-${i}`;
        const what = `message ${i + 1}`;
        return (
          <div key={i} className="row-card prompt-row" data-index={i}>
            <div className="row-head">
              <span className="row-title">Message {i + 1}</span>
              <label htmlFor={`${id}-role`} className="inline-label">Role<span className="visually-hidden"> of {what}</span></label>
              <select id={`${id}-role`} value={ROLES.includes(p.role) ? p.role : 'user'} onChange={e => set(i, { ...p, role: e.target.value })}>
                {ROLES.map(r => <option key={r} value={r}>{r}</option>)}
              </select>
              <RowButtons i={i} count={prompts.length} what={what} onMove={(k, by) => onChange(move(prompts, k, by))}
                onRemove={k => onChange(prompts.filter((_, j) => j !== k))} removable={prompts.length > 1} />
            </div>
            <span id={`${id}-label`} className="visually-hidden">Content of {what}</span>
            <RefText id={`${id}-content`} labelledBy={`${id}-label`} value={typeof p.content === 'string' ? p.content : ''}
              onChange={content => set(i, { ...p, content })} />
          </div>
        );
      })}
      <button type="button" onClick={() => onChange([...prompts, { role: prompts.length % 2 ? 'assistant' : 'user', content: '' }])}>Add a message</button>
      {problems.length ? <ul className="field-problems">{problems.map((x, i) => <li key={i} className={`severity-${x.severity}`}>{x.message}</li>)}</ul> : null}
    </fieldset>
  );
}

/** A list of texts with references (a Message's `content`: RAGFlow sends one, picked at random). */
export function TextListField({ name, value, onChange, prefix, title, what, problems = [] }) {
  const items = Array.isArray(value) ? value.map(v => (typeof v === 'string' ? v : JSON.stringify(v))) : typeof value === 'string' ? [value] : [];
  const shown = items.length ? items : [''];
  return (
    <fieldset className="rows-field text-list-field" data-field={`params.${name}`}>
      <legend>{title} <code className="key">{name}</code></legend>
      {shown.length > 1 ? <p className="muted help">One of these is sent, picked at random.</p> : null}
      {shown.map((text, i) => {
        const id = `${prefix}-${name}-${i}`;
        const label = `${what} ${i + 1}`;
        return (
          <div key={i} className="row-card">
            <div className="row-head">
              <span id={`${id}-label`} className="row-title">{label}</span>
              {shown.length > 1 ? <RowButtons i={i} count={shown.length} what={label} onMove={(k, by) => onChange(move(shown, k, by))}
                onRemove={k => onChange(shown.filter((_, j) => j !== k))} /> : null}
            </div>
            <RefText id={id} labelledBy={`${id}-label`} value={text} onChange={t => onChange(shown.map((v, j) => (j === i ? t : v)))} />
          </div>
        );
      })}
      <button type="button" onClick={() => onChange([...shown, ''])}>Add {what.toLowerCase()}</button>
      {problems.length ? <ul className="field-problems">{problems.map((x, i) => <li key={i} className={`severity-${x.severity}`}>{x.message}</li>)}</ul> : null}
    </fieldset>
  );
}
