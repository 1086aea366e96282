// The params that pair names or operations with references, as rows instead of JSON: a CodeExec's
// `arguments` ({name: reference}), a VariableAssigner's `variables` ([{variable, operator, parameter}]:
// SPEC 3.10) and a VariableAggregator's `groups` ([{group_name, type, variables: [{value}]}]: SPEC 3.11).
// References are chosen from what is in scope (RefSelect, refeditor.jsx).
import { RefSelect, RefText } from './refeditor.jsx';

function Remove({ label, onClick }) {
  return <button type="button" className="danger" aria-label={label} onClick={onClick}>✕</button>;
}

/** `arguments` of a CodeExec: the script's parameters, each given a reference. */
export function ArgumentsField({ value, onChange, prefix }) {
  const args = value && typeof value === 'object' && !Array.isArray(value) ? Object.entries(value) : [];
  const put = rows => onChange(Object.fromEntries(rows));
  return (
    <fieldset className="rows-field arguments-field" data-field="params.arguments">
      <legend>Arguments <code className="key">arguments</code></legend>
      {args.map(([name, ref], i) => (
        <div key={i} className="condition-row">
          <input id={`${prefix}-arg-${i}-name`} type="text" aria-label={`Argument ${i + 1}: name`} value={name}
            onChange={e => { if (!args.some(([n], j) => j !== i && n === e.target.value)) put(args.map((a, j) => (j === i ? [e.target.value, a[1]] : a))); }} />
          <RefSelect id={`${prefix}-arg-${i}-ref`} label={`Argument ${i + 1}: reference`} value={ref}
            onChange={v => put(args.map((a, j) => (j === i ? [a[0], v] : a)))} />
          <Remove label={`Remove argument ${i + 1}`} onClick={() => put(args.filter((_, j) => j !== i))} />
        </div>
      ))}
      <button type="button" onClick={() => {
        let n = args.length + 1;
        while (args.some(([k]) => k === `arg${n}`)) n++;
        put([...args, [`arg${n}`, '']]);
      }}>Add an argument</button>
    </fieldset>
  );
}

// RAGFlow's assignment operators (SPEC 3.10): which take a reference, which a value, which nothing
const ASSIGN = [['overwrite', 'overwrite with', 'ref'], ['clear', 'clear', 'none'], ['set', 'set to', 'text'],
  ['append', 'append', 'ref'], ['extend', 'extend with', 'text'], ['remove_first', 'remove the first', 'none'],
  ['remove_last', 'remove the last', 'none'], ['+=', 'add', 'text'], ['-=', 'subtract', 'text'], ['*=', 'multiply by', 'text'],
  ['/=', 'divide by', 'text']];

/** `variables` of a VariableAssigner: which variable, what operation, with what. */
export function AssignmentsField({ value, onChange, prefix }) {
  const rows = Array.isArray(value) ? value : [];
  const set = (i, r) => onChange(rows.map((x, j) => (j === i ? r : x)));
  return (
    <fieldset className="rows-field assignments-field" data-field="params.variables">
      <legend>Assignments <code className="key">variables</code></legend>
      {rows.map((r0, i) => {
        const r = r0 && typeof r0 === 'object' ? r0 : {};
        const what = `Assignment ${i + 1}`;
        const op = typeof r.operator === 'string' ? r.operator : '';
        const takes = (ASSIGN.find(([v]) => v === op) || [])[2] || 'text';
        return (
          <div key={i} className="row-card">
            <div className="row-head"><span className="row-title">{what}</span>
              <Remove label={`Remove ${what.toLowerCase()}`} onClick={() => onChange(rows.filter((_, j) => j !== i))} /></div>
            <div className="row-grid">
              <RefSelect id={`${prefix}-assign-${i}-var`} label={`${what}: variable`} value={r.variable} onChange={v => set(i, { ...r, variable: v })} />
              <select id={`${prefix}-assign-${i}-op`} aria-label={`${what}: operation`} value={op}
                onChange={e => set(i, { ...r, operator: e.target.value, parameter: (ASSIGN.find(([v]) => v === e.target.value) || [])[2] === 'none' ? null : r.parameter ?? '' })}>
                {ASSIGN.some(([v]) => v === op) ? null : <option value={op}>{op || '(operation)'}</option>}
                {ASSIGN.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
              </select>
              {takes === 'ref' ? <RefSelect id={`${prefix}-assign-${i}-param`} label={`${what}: with`} value={r.parameter} onChange={v => set(i, { ...r, parameter: v })} />
                : takes === 'text' ? <RefText id={`${prefix}-assign-${i}-param`} label={`${what}: with`} multiline={false}
                  value={r.parameter === undefined || r.parameter === null ? '' : typeof r.parameter === 'string' ? r.parameter : JSON.stringify(r.parameter)}
                  onChange={v => set(i, { ...r, parameter: v })} /> : null}
            </div>
          </div>
        );
      })}
      <button type="button" onClick={() => onChange([...rows, { variable: '', operator: 'overwrite', parameter: '' }])}>Add an assignment</button>
    </fieldset>
  );
}

/** `groups` of a VariableAggregator: each group's output is the first of its references that has a value. */
export function GroupsField({ value, onChange, prefix }) {
  const groups = Array.isArray(value) ? value : [];
  const set = (i, g) => onChange(groups.map((x, j) => (j === i ? g : x)));
  return (
    <fieldset className="rows-field groups-field" data-field="params.groups">
      <legend>Groups <code className="key">groups</code></legend>
      <p className="muted help">Each group's output is the first of its variables that has a value.</p>
      {groups.map((g0, i) => {
        const g = g0 && typeof g0 === 'object' ? g0 : {};
        const what = `Group ${i + 1}`;
        const vars = Array.isArray(g.variables) ? g.variables : [];
        return (
          <div key={i} className="row-card">
            <div className="row-head"><span className="row-title">{what}</span>
              <Remove label={`Remove ${what.toLowerCase()}`} onClick={() => onChange(groups.filter((_, j) => j !== i))} /></div>
            <div className="row-grid">
              <label htmlFor={`${prefix}-group-${i}-name`}>Output name</label>
              <input id={`${prefix}-group-${i}-name`} type="text" value={g.group_name || ''} onChange={e => set(i, { ...g, group_name: e.target.value })} />
              {vars.map((v, k) => (
                <div key={k} className="ref-row">
                  <RefSelect id={`${prefix}-group-${i}-var-${k}`} label={`${what}, variable ${k + 1}`} value={v && typeof v === 'object' ? v.value : v}
                    onChange={ref => set(i, { ...g, variables: vars.map((x, j) => (j === k ? { ...(x && typeof x === 'object' ? x : {}), value: ref } : x)) })} />
                  <Remove label={`Remove ${what.toLowerCase()}, variable ${k + 1}`} onClick={() => set(i, { ...g, variables: vars.filter((_, j) => j !== k) })} />
                </div>
              ))}
              <button type="button" onClick={() => set(i, { ...g, variables: [...vars, { value: '' }] })}>Add a variable to {what.toLowerCase()}</button>
            </div>
          </div>
        );
      })}
      <button type="button" onClick={() => onChange([...groups, { group_name: `Group${groups.length + 1}`, type: 'string', variables: [{ value: '' }] }])}>Add a group</button>
    </fieldset>
  );
}
