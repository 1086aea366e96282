// A Switch's cases as a builder instead of `conditions` as JSON: per case, rows of a reference (chosen
// from what is in scope), an operator (RAGFlow's set) and a value, joined by and / or, and the case's
// target; then where everything else goes (`end_cpn_ids`). A Loop's termination condition uses the same
// rows (ConditionRows). Targets change through the edit model (editmodel.js setParams).
import { RefSelect, useScope } from './refeditor.jsx';
import { TargetsField, targetChoices, useRemeasure } from './categoriesfield.jsx';

/** RAGFlow's comparison operators (its web SwitchOperatorOptions), with what they read as. */
export const OPERATORS = [
  ['=', 'equals'], ['≠', 'does not equal'], ['>', 'greater than'], ['≥', 'at least'], ['<', 'less than'], ['≤', 'at most'],
  ['contains', 'contains'], ['not contains', 'does not contain'], ['start with', 'starts with'], ['end with', 'ends with'],
  ['empty', 'is empty'], ['not empty', 'is not empty'], ['in', 'is in'], ['not in', 'is not in'],
];
const NO_VALUE = new Set(['empty', 'not empty']);

/** Rows of {<refKey>, operator, value}: `refKey` is `cpn_id` for a Switch, `variable` for a Loop. */
export function ConditionRows({ rows, onChange, prefix, refKey = 'cpn_id', what, operators = OPERATORS }) {
  const set = (i, row) => onChange(rows.map((r, j) => (j === i ? row : r)));
  return (
    <>
      {rows.map((row, i) => {
        const r = row && typeof row === 'object' ? row : {};
        const id = `${prefix}-row-${i}`;
        const name = `${what}, condition ${i + 1}`;
        const op = typeof r.operator === 'string' ? r.operator : '';
        return (
          <div key={i} className="condition-row">
            <RefSelect id={`${id}-ref`} label={`${name}: reference`} value={r[refKey]} onChange={v => set(i, { ...r, [refKey]: v })} />
            <select id={`${id}-op`} aria-label={`${name}: operator`} value={op} onChange={e => set(i, { ...r, operator: e.target.value })}>
              {operators.some(([v]) => v === op) ? null : <option value={op}>{op || '(operator)'}</option>}
              {operators.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
            </select>
            {NO_VALUE.has(op) ? <span /> : <input id={`${id}-value`} type="text" aria-label={`${name}: value`}
              value={r.value === undefined || r.value === null ? '' : String(r.value)} onChange={e => set(i, { ...r, value: e.target.value })} />}
            <button type="button" className="danger" aria-label={`Remove ${name}`} onClick={() => onChange(rows.filter((_, j) => j !== i))}>✕</button>
          </div>
        );
      })}
      <button type="button" onClick={() => onChange([...rows, { [refKey]: '', operator: operators[0][0], value: '' }])}>Add a condition to {what.toLowerCase()}</button>
    </>
  );
}

/** and / or between a case's conditions. */
export function JoinSelect({ id, value, onChange, label }) {
  return (
    <select id={id} aria-label={label} value={value === 'or' ? 'or' : 'and'} onChange={e => onChange(e.target.value)}>
      <option value="and">all of these hold (and)</option>
      <option value="or">any of these holds (or)</option>
    </select>
  );
}

/** `conditions` and `end_cpn_ids` of a Switch. */
export function SwitchField({ componentId, params, onChange, prefix, problems = [] }) {
  const { dsl } = useScope();
  const cases = Array.isArray(params.conditions) ? params.conditions : [];
  const choices = targetChoices(dsl, componentId);
  useRemeasure(componentId, cases.length);
  const setCases = next => onChange({ ...params, conditions: next });
  const setCase = (i, c) => setCases(cases.map((x, j) => (j === i ? c : x)));
  const mine = problems.filter(p => /^params\.(conditions|end_cpn_ids)/.test(p.field || ''));
  return (
    <fieldset className="rows-field switch-field" data-field="params.conditions">
      <legend>Cases <code className="key">conditions</code></legend>
      {cases.map((c0, i) => {
        const c = c0 && typeof c0 === 'object' ? c0 : {};
        const id = `${prefix}-case-${i}`;
        const what = `Case ${i + 1}`;
        return (
          <div key={i} className="row-card case-row" data-case={i}>
            <div className="row-head">
              <span className="row-title">{what}</span>
              <JoinSelect id={`${id}-join`} label={`${what}: joins its conditions by`} value={c.logical_operator}
                onChange={v => setCase(i, { ...c, logical_operator: v })} />
              <button type="button" className="danger" aria-label={`Remove ${what.toLowerCase()}`} onClick={() => setCases(cases.filter((_, j) => j !== i))}>Remove</button>
            </div>
            <ConditionRows rows={Array.isArray(c.items) ? c.items : []} prefix={id} what={what} onChange={items => setCase(i, { ...c, items })} />
            <div className="row-grid">
              <label htmlFor={`${id}-to`}>{what} goes to</label>
              <TargetsField id={`${id}-to`} label={`${what} goes to`} targets={c.to} choices={choices} onChange={to => setCase(i, { ...c, to })} />
            </div>
          </div>
        );
      })}
      <button type="button" onClick={() => setCases([...cases, { logical_operator: 'and', items: [{ cpn_id: '', operator: '=', value: '' }], to: [] }])}>Add a case</button>
      <div className="row-card else-row">
        <label htmlFor={`${prefix}-else`}>Else goes to <code className="key">end_cpn_ids</code></label>
        <TargetsField id={`${prefix}-else`} label="Else goes to" targets={params.end_cpn_ids} choices={choices}
          onChange={to => onChange({ ...params, end_cpn_ids: to })} />
      </div>
      {mine.length ? <ul className="field-problems">{mine.map((p, k) => <li key={k} className={`severity-${p.severity}`}>{p.message}</li>)}</ul> : null}
    </fieldset>
  );
}
