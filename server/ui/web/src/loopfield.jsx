// A Loop's variables and termination condition as rows instead of JSON. A variable has a name, a type
// and a value that is either a constant or a reference (`input_mode`); the body reads and changes it as
// `Loop:Id@<name>` (scope.js offers it inside the Loop). The condition is checked before every pass (SPEC
// 3.9: the loop runs while it does not hold) and joins its rows by the Loop's `logical_operator`.
import { RefSelect } from './refeditor.jsx';
import { ConditionRows, JoinSelect } from './switchfield.jsx';

const TYPES = ['string', 'number', 'boolean', 'object', 'array<string>', 'array<number>', 'array<object>'];
// RAGFlow's loop operators (the engine picks by the variable's runtime type)
const LOOP_OPERATORS = [['contains', 'contains'], ['not contains', 'does not contain'], ['start with', 'starts with'],
  ['end with', 'ends with'], ['is', 'is'], ['is not', 'is not'], ['empty', 'is empty'], ['not empty', 'is not empty'],
  ['=', 'equals'], ['≠', 'does not equal'], ['>', 'greater than'], ['<', 'less than'], ['≥', 'at least'], ['≤', 'at most']];

/** A constant typed as the variable's type says (a number, a boolean, JSON for objects and arrays). */
function constantOf(text, type) {
  if (type === 'number') return text.trim() === '' || isNaN(Number(text)) ? text : Number(text);
  if (type === 'boolean') return text === 'true';
  if (type === 'object' || type.startsWith('array')) { try { return JSON.parse(text); } catch { return text; } }
  return text;
}
const shownConstant = v => (v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v));

export function LoopVariablesField({ value, onChange, prefix }) {
  const vars = Array.isArray(value) ? value : [];
  const set = (i, v) => onChange(vars.map((x, j) => (j === i ? v : x)));
  return (
    <fieldset className="rows-field loop-variables-field" data-field="params.loop_variables">
      <legend>Loop variables <code className="key">loop_variables</code></legend>
      {vars.map((v0, i) => {
        const v = v0 && typeof v0 === 'object' ? v0 : {};
        const id = `${prefix}-loopvar-${i}`;
        const what = `Variable ${i + 1}`;
        const type = typeof v.type === 'string' ? v.type : 'string';
        return (
          <div key={i} className="row-card loop-variable-row">
            <div className="row-head">
              <span className="row-title">{what}</span>
              <button type="button" className="danger" aria-label={`Remove ${what.toLowerCase()}`} onClick={() => onChange(vars.filter((_, j) => j !== i))}>Remove</button>
            </div>
            <div className="row-grid">
              <label htmlFor={`${id}-name`}>Name</label>
              <input id={`${id}-name`} type="text" value={v.variable || ''} onChange={e => set(i, { ...v, variable: e.target.value })} />
              <label htmlFor={`${id}-type`}>Type</label>
              <select id={`${id}-type`} value={type} onChange={e => set(i, { ...v, type: e.target.value })}>
                {TYPES.includes(type) ? null : <option value={type}>{type}</option>}
                {TYPES.map(t => <option key={t} value={t}>{t}</option>)}
              </select>
              <label htmlFor={`${id}-mode`}>Starts from</label>
              <select id={`${id}-mode`} value={v.input_mode === 'variable' ? 'variable' : 'constant'}
                onChange={e => set(i, { ...v, input_mode: e.target.value, value: e.target.value === 'variable' ? '' : constantOf('', type) })}>
                <option value="constant">a constant</option>
                <option value="variable">a reference</option>
              </select>
              <label htmlFor={`${id}-value`}>{v.input_mode === 'variable' ? 'Reference' : 'Value'}</label>
              {v.input_mode === 'variable'
                ? <RefSelect id={`${id}-value`} value={v.value} onChange={ref => set(i, { ...v, value: ref })} />
                : <input id={`${id}-value`} type="text" value={shownConstant(v.value)} onChange={e => set(i, { ...v, value: constantOf(e.target.value, type) })} />}
            </div>
          </div>
        );
      })}
      <button type="button" onClick={() => onChange([...vars, { variable: `var${vars.length + 1}`, type: 'string', input_mode: 'constant', value: '' }])}>Add a variable</button>
    </fieldset>
  );
}

/** `loop_termination_condition` and the Loop's `logical_operator`: rows of {variable, operator, value}. */
export function TerminationField({ params, onChange, prefix }) {
  const rows = Array.isArray(params.loop_termination_condition) ? params.loop_termination_condition : [];
  return (
    <fieldset className="rows-field termination-field" data-field="params.loop_termination_condition">
      <legend>Stops when <code className="key">loop_termination_condition</code></legend>
      <JoinSelect id={`${prefix}-loop-join`} label="Stops when its conditions are joined by" value={params.logical_operator}
        onChange={v => onChange({ ...params, logical_operator: v })} />
      <ConditionRows rows={rows} prefix={`${prefix}-stop`} refKey="variable" what="Stop" operators={LOOP_OPERATORS}
        onChange={next => onChange({ ...params, loop_termination_condition: next.map(r => ({ input_mode: 'constant', ...r })) })} />
    </fieldset>
  );
}
