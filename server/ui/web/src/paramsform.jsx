// A component's params as a form generated from the JSON schema of its params model (GET /components):
// text, numbers, switches and choices as their own controls, anything structured as JSON checked as it is
// typed. The fields every component inherits (retries, exception handling...) sit under "Advanced". An
// Agent's tools are a list of tool entries, each with its own generated form, and its MCP servers a list of
// servers with their tools (mcpform.jsx). A Message's memories (`memory_ids`, `user_id`) are picked by name, and a
// Retrieval chooses its source, datasets or memories (memoryfield.jsx); the fields the chosen source does not use
// are set aside. Diagnostics that name a field (`params.llm_id`) show under it.
//
// What is structured is edited as such, never as JSON: text that takes references (prompts, a Message's
// replies, tips, SQL...) in the reference editor, whose picker offers what is in scope at this component
// (refeditor.jsx, scope.js); a field holding one reference (`query`, `items_ref`) as a list of those; an
// LLM's messages (promptfield.jsx), a Categorize's categories (categoriesfield.jsx), a Switch's cases
// (switchfield.jsx), a Loop's variables and condition (loopfield.jsx), the model and its sampling values
// (modelfield.jsx), a CodeExec's arguments, a VariableAssigner's assignments and a VariableAggregator's groups
// (varfields.jsx).
import { useEffect, useId, useMemo, useState } from 'react';
import { fieldLabel } from './forms.jsx';
import { McpField } from './mcpform.jsx';
import { DATASET_ONLY, MemoryField, SourceField, sourceOf } from './memoryfield.jsx';
import { CategoriesField } from './categoriesfield.jsx';
import { LoopVariablesField, TerminationField } from './loopfield.jsx';
import { ModelField, SamplingField, SAMPLING_FIELDS } from './modelfield.jsx';
import { PromptsField, TextListField } from './promptfield.jsx';
import { RefSelect, RefText, ScopeContext } from './refeditor.jsx';
import { scopeOf } from './scope.js';
import { SwitchField } from './switchfield.jsx';
import { ArgumentsField, AssignmentsField, GroupsField } from './varfields.jsx';
import { jsonError, pretty } from './util.js';

const NAMES = { llm_id: 'Model', sys_prompt: 'System prompt', category_description: 'Categories', end_cpn_ids: 'Else goes to',
  max_rounds: 'Most tool rounds', max_tokens: 'Most tokens', top_p: 'Top p', mcp: 'MCP servers' };
const LONG = /prompt|content|text|script|sql|query|description|tips|template|code|instruction/i;
// string params whose text takes references (RAGFlow edits them with its prompt editor, the variable picker)
const REF_TEXT = new Set(['sys_prompt', 'user_prompt', 'prompts', 'content', 'tips', 'subject', 'to_email', 'cc_email', 'sql',
  'url', 'script', 'text', 'template', 'header', 'footer', 'filename']);
const REF_TEXT_ONE_LINE = new Set(['subject', 'to_email', 'cc_email', 'url', 'filename', 'header', 'footer']);
// string params that hold one reference, bare (`sys.query`), as RAGFlow's QueryVariable picks it
const ONE_REF = new Set(['query', 'items_ref', 'visual_files_var']);

/** A property's schema with `$ref` followed and `anyOf [X, null]` reduced to X. */
function resolve(schema, defs) {
  let s = schema || {};
  for (let i = 0; i < 5; i++) {
    if (s.$ref) s = { ...defs[s.$ref.split('/').pop()], ...s, $ref: undefined };
    else if (Array.isArray(s.anyOf)) {
      const real = s.anyOf.filter(v => v && v.type !== 'null');
      s = real.length === 1 ? { ...s, ...real[0], anyOf: undefined } : { ...s, anyOf: undefined, type: undefined, nullable: true };
    } else break;
  }
  return s;
}

function JsonField({ id, value, onChange, invalid, describedBy }) {
  const shown = v => (v === undefined ? '' : pretty(v));
  const [text, setText] = useState(shown(value));
  const [error, setError] = useState('');
  useEffect(() => { setText(shown(value)); setError(''); }, [JSON.stringify(value)]);     // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <>
      <textarea id={id} rows={Math.min(10, Math.max(2, text.split('\n').length))} spellCheck="false" value={text} placeholder="JSON"
        aria-invalid={invalid || Boolean(error)} aria-describedby={describedBy}
        onChange={e => {
          setText(e.target.value);
          if (!e.target.value.trim()) { setError(''); onChange(undefined); return; }
          try { const parsed = JSON.parse(e.target.value); setError(''); onChange(parsed); } catch (err) { setError(jsonError(e.target.value, err)); }
        }} />
      {error ? <p className="field-error">{error}</p> : null}
    </>
  );
}

function Control({ id, name, schema, value, onChange, invalid, describedBy, refText = false, plain = false }) {
  const current = value === undefined ? schema.default : value;
  const common = { id, 'aria-invalid': invalid || undefined, 'aria-describedby': describedBy };
  const text = schema.type === 'string' && (typeof current === 'string' || current === undefined || current === null);
  if (text && name === 'llm_id') return <ModelField id={id} value={current} onChange={onChange} invalid={invalid} describedBy={describedBy} />;
  if (text && ONE_REF.has(name) && !refText) return <RefSelect {...{ id, value: current, onChange, invalid, describedBy }} />;
  if (text && !plain && (REF_TEXT.has(name) || refText)) {
    return <RefText id={id} labelledBy={`${id}-label`} value={current || ''} onChange={onChange} invalid={invalid} describedBy={describedBy}
      multiline={!REF_TEXT_ONE_LINE.has(name)} bareWhole={refText} />;
  }
  if (Array.isArray(schema.enum)) {
    return (
      <select {...common} value={current === undefined || current === null ? '' : String(current)}
        onChange={e => onChange(e.target.value === '' ? null : schema.enum.find(v => String(v) === e.target.value))}>
        <option value="">(none)</option>
        {schema.enum.map(v => <option key={String(v)} value={String(v)}>{String(v)}</option>)}
      </select>
    );
  }
  if (schema.type === 'boolean') return <input {...common} type="checkbox" checked={Boolean(current)} onChange={e => onChange(e.target.checked)} />;
  if (schema.type === 'integer' || schema.type === 'number') {
    return <input {...common} type="number" step={schema.type === 'integer' ? '1' : 'any'} min={schema.minimum} max={schema.maximum}
      value={current === undefined || current === null ? '' : current}
      onChange={e => onChange(e.target.value === '' ? null : Number(e.target.value))} />;
  }
  if (schema.type === 'string' && (typeof current === 'string' || current === undefined || current === null)) {
    const text = current || '';
    if (LONG.test(name) || text.includes('\n') || text.length > 60) {
      return <textarea {...common} rows={Math.min(8, Math.max(3, text.split('\n').length))} value={text} onChange={e => onChange(e.target.value)} />;
    }
    return <input {...common} type="text" value={text} onChange={e => onChange(e.target.value)} />;
  }
  return <JsonField id={id} value={current} onChange={onChange} invalid={invalid} describedBy={describedBy} />;
}

function Field({ name, schema, value, onChange, problems, prefix, refText, plain }) {
  const id = `${prefix}-${name.replace(/[^\w-]/g, '_')}`;
  const mine = problems.filter(p => p.field === `params.${name}` || (p.field || '').startsWith(`params.${name}.`));
  const help = schema.description ? `${id}-help` : undefined;
  const errs = mine.length ? `${id}-problems` : undefined;
  const label = <label id={`${id}-label`} htmlFor={id}>{NAMES[name] || fieldLabel(name, {})} <code className="key">{name}</code></label>;
  const control = <Control id={id} name={name} schema={schema} value={value} onChange={onChange} invalid={mine.length > 0} refText={refText} plain={plain}
    describedBy={[help, errs].filter(Boolean).join(' ') || undefined} />;
  return (
    <div className={`param-field type-${schema.type || 'json'}${mine.length ? ' has-problem' : ''}`} data-field={`params.${name}`}>
      {schema.type === 'boolean' ? <div className="field-boolean">{control}{label}</div> : <>{label}{control}</>}
      {help ? <p id={help} className="muted help">{schema.description}</p> : null}
      {mine.length ? <ul id={errs} className="field-problems">{mine.map((p, i) => <li key={i} className={`severity-${p.severity}`}>{p.message}</li>)}</ul> : null}
    </div>
  );
}

function ToolsField({ value, onChange, schemas, problems, prefix }) {
  const tools = Array.isArray(value) ? value : [];
  const choices = schemas.filter(s => s.kind === 'tool' || s.component_name === 'Agent' || s.component_name === 'Retrieval');
  const [pick, setPick] = useState(choices[0] ? choices[0].component_name : '');
  const byName = Object.fromEntries(schemas.map(s => [s.component_name, s]));
  const change = (i, entry) => onChange(tools.map((t, j) => (j === i ? entry : t)));
  return (
    <fieldset className="tools-field" data-field="params.tools">
      <legend>Tools and sub-agents</legend>
      {tools.map((tool, i) => {
        const spec = byName[tool.component_name];
        return (
          <details key={i} className="tool-entry" open>
            <summary>{tool.name || tool.component_name}</summary>
            <div className="buttons">
              <label htmlFor={`${prefix}-tool-${i}-name`} className="inline-label">Name</label>
              <input id={`${prefix}-tool-${i}-name`} type="text" value={tool.name || ''} onChange={e => change(i, { ...tool, name: e.target.value })} />
              <button type="button" className="danger" onClick={() => onChange(tools.filter((_, j) => j !== i))}>Remove {tool.name || tool.component_name}</button>
            </div>
            {spec ? <ParamsFields schema={spec.schema} common={spec.common} params={tool.params || {}} schemas={schemas}
              problems={problems.filter(p => (p.field || '').startsWith(`params.tools.${i}.`)).map(p => ({ ...p, field: p.field.replace(`params.tools.${i}.`, '') }))}
              onChange={params => change(i, { ...tool, params })} prefix={`${prefix}-tool-${i}`} />
              : <p className="muted">{tool.component_name}: no form for this tool.</p>}
          </details>
        );
      })}
      <div className="buttons">
        <label htmlFor={`${prefix}-new-tool`} className="inline-label">Tool</label>
        <select id={`${prefix}-new-tool`} value={pick} onChange={e => setPick(e.target.value)}>
          {choices.map(c => <option key={c.component_name} value={c.component_name}>{c.component_name}</option>)}
        </select>
        <button type="button" onClick={() => onChange([...tools, { component_name: pick, name: pick, params: {} }])}>Add tool</button>
      </div>
    </fieldset>
  );
}

const problemsOf = (problems, ...names) => problems.filter(p => names.some(n => p.field === `params.${n}` || (p.field || '').startsWith(`params.${n}.`)));

/** The fields of one params object. `problems` name fields as `params.<name>...`; `componentId` is the
 * component they belong to (the router fields choose its targets). */
export function ParamsFields({ schema, common = [], params, onChange, problems = [], schemas = [], prefix, componentId }) {
  const defs = (schema && schema.$defs) || {};
  const props = (schema && schema.properties) || {};
  const names = Object.keys(props);
  // keys the params model does not declare, but those the structured fields above edit
  const extra = Object.keys(params || {}).filter(k => !props[k] && !(props.temperature && SAMPLING_FIELDS.has(k))
    && !(k === 'logical_operator' && props.loop_termination_condition));
  const set = (name, v) => onChange({ ...(params || {}), [name]: v });
  const values = params || {};
  const memory = Boolean(props.memory_ids);             // saves to memories (a Message), or reads them (a Retrieval)
  const reader = memory && Boolean(props.retrieval_from);
  const sampling = Boolean(props.temperature && props.top_p);
  const field = name => {
    if (sampling && SAMPLING_FIELDS.has(name)) {
      return name === 'temperature' ? <SamplingField key={name} params={values} onChange={onChange} prefix={prefix} initial={schema['x-initial']} /> : null;
    }
    const resolved = resolve(props[name] || {}, defs);
    if (name === 'prompts' && resolved.type === 'array') {
      return <PromptsField key={name} value={values.prompts} onChange={v => set(name, v)} prefix={prefix} problems={problemsOf(problems, name)} />;
    }
    if (name === 'content' && resolved.type === 'array') {
      return <TextListField key={name} name={name} title="Replies" what="Reply" value={values.content} onChange={v => set(name, v)} prefix={prefix}
        problems={problemsOf(problems, name)} />;
    }
    if (name === 'category_description' && componentId) {
      return <CategoriesField key={name} componentId={componentId} value={values[name]} onChange={v => set(name, v)} prefix={prefix}
        problems={problemsOf(problems, name)} />;
    }
    if (name === 'conditions' && props.end_cpn_ids && componentId) {
      return <SwitchField key={name} componentId={componentId} params={values} onChange={onChange} prefix={prefix} problems={problems} />;
    }
    if (name === 'end_cpn_ids' && props.conditions && componentId) return null;          // in the Switch's cases
    if (name === 'operators' && props.conditions) return null;                        // informational (SPEC 3.7)
    if (name === 'loop_variables') return <LoopVariablesField key={name} value={values[name]} onChange={v => set(name, v)} prefix={prefix} />;
    if (name === 'loop_termination_condition') return <TerminationField key={name} params={values} onChange={onChange} prefix={prefix} />;
    if (name === 'logical_operator' && props.loop_termination_condition) return null;  // in the termination field
    if (name === 'arguments' && props.script && props.lang) return <ArgumentsField key={name} value={values[name]} onChange={v => set(name, v)} prefix={prefix} />;
    if (name === 'variables' && Object.keys(props).filter(k => !common.includes(k)).length === 1) {     // a VariableAssigner's, its only own field
      return <AssignmentsField key={name} value={values[name]} onChange={v => set(name, v)} prefix={prefix} />;
    }
    if (name === 'groups') return <GroupsField key={name} value={values[name]} onChange={v => set(name, v)} prefix={prefix} />;
    if (memory && name === 'memory_ids') {
      return <MemoryField key={name} saves={!reader} ids={values.memory_ids} userId={values.user_id} problems={problems} prefix={prefix}
        onIds={v => set('memory_ids', v)} onUserId={v => set('user_id', v)} />;
    }
    if (memory && name === 'user_id' && props.user_id) return null;          // in the memory field
    if (reader && name === 'retrieval_from') {
      return <SourceField key={name} params={values} onChange={v => set(name, v)} problems={problems} prefix={prefix} />;
    }
    if (name === 'tools' && schemas.length) {
      return <ToolsField key={name} value={params[name]} onChange={v => set(name, v)} schemas={schemas} problems={problems} prefix={prefix} />;
    }
    if (name === 'mcp' && schemas.length) {
      return <McpField key={name} value={(params || {})[name]} onChange={v => set(name, v)} problems={problems} prefix={prefix} />;
    }
    // a Retrieval's query is text with references (RAGFlow's prompt editor; the engine formats it), not one reference
    const retrievalQuery = name === 'query' && Boolean(props.kb_ids || props.dataset_ids);
    return <Field key={name} name={name} schema={resolved} value={(params || {})[name]} onChange={v => set(name, v)}
      problems={problems} prefix={prefix} refText={retrievalQuery} plain={name === 'script' && Boolean(props.lang)} />;   // a CodeExec's script is code
  };
  let own = names.filter(n => !common.includes(n));
  if (sampling) own = [...own.filter(n => !SAMPLING_FIELDS.has(n)), 'temperature'];      // the sampling values after the prompts
  const shared = names.filter(n => common.includes(n));
  let aside = [];                // what the Retrieval's source does not use, out of the way (never out of reach)
  const source = reader ? sourceOf(values) : null;
  if (reader) {
    const unused = source === 'memory' ? DATASET_ONLY : ['memory_ids', 'user_id'];
    aside = own.filter(n => unused.includes(n));
    const first = source === 'memory' ? ['retrieval_from', 'memory_ids'] : ['retrieval_from'];
    own = [...first, ...own.filter(n => !first.includes(n) && !unused.includes(n))];
  }
  return (
    <div className="params-fields">
      {own.map(field)}
      {aside.length ? (
        <details className="unused-fields" open={problems.some(p => aside.some(n => p.field === `params.${n}` || (p.field || '').startsWith(`params.${n}.`)))}>
          <summary>Not used when searching {source === 'memory' ? 'memories' : 'datasets'}</summary>{aside.map(field)}
        </details>) : null}
      {extra.length ? <details className="extra-fields"><summary>Other fields ({extra.length})</summary>{extra.map(field)}</details> : null}
      {shared.length ? <details className="advanced"><summary>Advanced</summary>{shared.map(field)}</details> : null}
    </div>
  );
}

/** The params form of `componentId`; `dsl` (the agent being edited) says what its references may name. */
export function ParamsForm({ componentId, spec, params, onChange, problems, schemas, dsl }) {
  const prefix = `p${useId().replace(/:/g, '')}`;
  const specs = useMemo(() => Object.fromEntries((schemas || []).map(s => [s.component_name, s])), [schemas]);
  const scope = useMemo(() => ({ dsl, groups: scopeOf(dsl, componentId, specs) }), [dsl, componentId, specs]);
  if (!spec) return <p className="muted">No params model for this component.</p>;
  return (
    <ScopeContext.Provider value={scope}>
      <form className="params-form" aria-label={`Params of ${componentId}`} onSubmit={e => e.preventDefault()}>
        <ParamsFields schema={spec.schema} common={spec.common} params={params || {}} onChange={onChange} problems={problems}
          schemas={schemas} prefix={prefix} componentId={componentId} />
      </form>
    </ScopeContext.Provider>
  );
}
