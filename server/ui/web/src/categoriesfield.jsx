// A Categorize's categories as rows (name, description, examples, the component it goes to), instead of
// `category_description` as JSON. Targets are chosen from the components of the same canvas level; the
// new params go through the edit model (editmodel.js setParams), which keeps `downstream`, the graph's
// edges and RAGFlow's `items` (a uuid per category) in step with them.
import { useEffect, useState } from 'react';
import { useUpdateNodeInternals } from '@xyflow/react';
import { useScope } from './refeditor.jsx';
import { displayName } from './scope.js';
import { componentsOf } from './util.js';

/** The components a router at `id` can send to: those on its own canvas level, but itself and Begin. */
export function targetChoices(dsl, id) {
  const components = componentsOf(dsl);
  const parent = components[id] && components[id].parent_id;
  return Object.keys(components).filter(k => k !== id && k !== 'begin' && (components[k].parent_id || undefined) === (parent || undefined));
}

/** React Flow measures a box's handles once: when a router's branches change (a category added, renamed or
 * removed, a case added), it is told to measure again, or it draws no edge from the new handles. */
export function useRemeasure(componentId, branches) {
  const remeasure = useUpdateNodeInternals();
  useEffect(() => {
    const timer = setTimeout(() => remeasure(componentId), 0);        // after the canvas drew the new handles
    return () => clearTimeout(timer);
  }, [componentId, branches]);                                        // eslint-disable-line react-hooks/exhaustive-deps
}

/** The targets of one branch: a list of components, each removable, and a list to add one more. */
export function TargetsField({ id, label, targets, onChange, choices }) {
  const { dsl } = useScope();
  const list = Array.isArray(targets) ? targets : typeof targets === 'string' && targets ? [targets] : [];
  const left = choices.filter(c => !list.includes(c));
  return (
    <div className="targets">
      {list.map(t => (
        <span key={t} className="target-chip">{displayName(dsl, t)}
          <button type="button" aria-label={`${label}: remove ${t}`} onClick={() => onChange(list.filter(x => x !== t))}>✕</button></span>
      ))}
      <select id={id} aria-label={list.length ? `${label}: add a target` : label} value=""
        onChange={e => e.target.value && onChange([...list, e.target.value])}>
        <option value="">{list.length ? '+ also to…' : '(choose a target)'}</option>
        {left.map(c => <option key={c} value={c}>{displayName(dsl, c)}</option>)}
      </select>
    </div>
  );
}

const examplesOf = d => (Array.isArray(d.examples) ? d.examples : typeof d.examples === 'string' && d.examples ? [d.examples] : [])
  .map(e => (typeof e === 'string' ? e : e && typeof e === 'object' && typeof e.value === 'string' ? e.value : JSON.stringify(e)));

/** The category's name, applied once it is a new, non-empty one (a clash with another would merge them). */
function NameInput({ id, name, taken, onRename }) {
  const [text, setText] = useState(name);
  const [error, setError] = useState('');
  return (
    <>
      <input id={id} type="text" value={error ? text : name} aria-invalid={Boolean(error) || undefined} aria-describedby={error ? `${id}-error` : undefined}
        onChange={e => {
          const next = e.target.value;
          setText(next);
          if (!next.trim()) setError('A category needs a name.');
          else if (next !== name && taken.includes(next)) setError(`Another category is named "${next}".`);
          else { setError(''); if (next !== name) onRename(next); }
        }} />
      {error ? <p id={`${id}-error`} className="field-error">{error}</p> : null}
    </>
  );
}

/** Examples one per line; the lines that are not blank are saved (the text keeps what is being typed). */
function ExamplesInput({ id, examples, onChange }) {
  const [text, setText] = useState(examples.join('\n'));
  const lines = t => t.split('\n').map(l => l.trim()).filter(Boolean);
  const shown = lines(text).join('\n') === examples.join('\n') ? text : examples.join('\n');      // an undo elsewhere shows
  return <textarea id={id} rows={Math.max(2, shown.split('\n').length)} value={shown}
    onChange={e => { setText(e.target.value); onChange(lines(e.target.value)); }} />;
}

/** `category_description` ({name: {description, examples, to}}) as rows. */
export function CategoriesField({ componentId, value, onChange, prefix, problems = [] }) {
  const { dsl } = useScope();
  const cats = value && typeof value === 'object' && !Array.isArray(value) ? value : {};
  const names = Object.keys(cats);
  const choices = targetChoices(dsl, componentId);
  useRemeasure(componentId, names.join('\n'));
  const put = (name, desc) => onChange({ ...cats, [name]: desc });
  const rename = (old, next) => onChange(Object.fromEntries(names.map(n => (n === old ? [next, cats[n]] : [n, cats[n]]))));
  const add = () => {
    let n = names.length + 1;
    while (cats[`category ${n}`]) n++;
    onChange({ ...cats, [`category ${n}`]: { description: '', examples: [], to: [] } });
  };
  return (
    <fieldset className="rows-field categories-field" data-field="params.category_description">
      <legend>Categories <code className="key">category_description</code></legend>
      {names.map((name, i) => {
        const d = cats[name] && typeof cats[name] === 'object' ? cats[name] : {};
        const id = `${prefix}-cat-${i}`;
        const mine = problems.filter(p => (p.message || '').includes(`'${name}'`) || (p.field || '').startsWith(`params.category_description.${name}`));
        return (
          <div key={i} className="row-card category-row" data-category={name}>
            <div className="row-head">
              <span className="row-title">Category {i + 1}</span>
              <button type="button" className="danger" onClick={() => onChange(Object.fromEntries(names.filter(n => n !== name).map(n => [n, cats[n]])))}
                aria-label={`Remove category ${name}`}>Remove</button>
            </div>
            <div className="row-grid">
              <label htmlFor={`${id}-name`}>Name</label>
              <NameInput id={`${id}-name`} name={name} taken={names.filter(n => n !== name)} onRename={next => rename(name, next)} />
              <label htmlFor={`${id}-description`}>Description</label>
              <textarea id={`${id}-description`} rows={2} value={typeof d.description === 'string' ? d.description : ''}
                onChange={e => put(name, { ...d, description: e.target.value })} />
              <label htmlFor={`${id}-examples`}>Examples (one per line)</label>
              <ExamplesInput id={`${id}-examples`} examples={examplesOf(d)} onChange={examples => put(name, { ...d, examples })} />
              <label htmlFor={`${id}-to`}>Goes to</label>
              <TargetsField id={`${id}-to`} label={`Category ${name} goes to`} targets={d.to} choices={choices} onChange={to => put(name, { ...d, to })} />
            </div>
            {mine.length ? <ul className="field-problems">{mine.map((p, k) => <li key={k} className={`severity-${p.severity}`}>{p.message}</li>)}</ul> : null}
          </div>
        );
      })}
      <button type="button" onClick={add}>Add a category</button>
    </fieldset>
  );
}
