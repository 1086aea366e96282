// An Agent's MCP servers (`params.mcp`) as a form: add and remove servers, each with its id in the MCP
// config (`mcp_id`) and the tools the Agent may call on it (`tools`: {name: {name, description,
// inputSchema}}, as RAGFlow stores them), add, rename and remove tools. What would not compile is said
// under the field it is about, naming it (`params.mcp.0.mcp_id`), before the check runs; the check's own
// diagnostics for `params.mcp...` show under the same fields.
import { useEffect, useState } from 'react';
import { jsonError, pretty } from './util.js';

const isObject = v => v !== null && typeof v === 'object' && !Array.isArray(v);

/** What is wrong with one MCP entry as typed, as [field, message] pairs (fields as diagnostics name them). */
export function mcpProblems(entry, i) {
  const where = `params.mcp.${i}`;
  if (!isObject(entry)) return [[where, `${where}: must be an object with an mcp_id and its tools`]];
  const out = [];
  if (typeof entry.mcp_id !== 'string' || !entry.mcp_id.trim()) out.push([`${where}.mcp_id`, `${where}.mcp_id: name the MCP server (its id in the MCP config)`]);
  if (entry.tools !== undefined && !isObject(entry.tools)) out.push([`${where}.tools`, `${where}.tools: must be an object of tool name: tool description`]);
  for (const [name, meta] of Object.entries(isObject(entry.tools) ? entry.tools : {})) {
    const field = `${where}.tools.${name}`;
    if (!isObject(meta)) { out.push([field, `${field}: must be the tool's description: {name, description, inputSchema}`]); continue; }
    const schema = meta.inputSchema !== undefined ? meta.inputSchema : meta.input_schema;
    if (schema !== undefined && schema !== null && !isObject(schema)) out.push([`${field}.inputSchema`, `${field}.inputSchema: must be a JSON schema object`]);
  }
  return out;
}

function Problems({ id, messages }) {
  if (!messages.length) return null;
  return <ul id={id} className="field-problems">{messages.map((m, k) => <li key={k} className={`severity-${m.severity || 'error'}`}>{m.message}</li>)}</ul>;
}

/** One labelled control with the messages about `field` under it (typed ones and the check's). */
function Row({ id, label, field, messages, children }) {
  const mine = messages.filter(m => m.field === field);
  return (
    <div className={`param-field${mine.length ? ' has-problem' : ''}`} data-field={field}>
      <label htmlFor={id}>{label}</label>
      {children(mine.length > 0, mine.length ? `${id}-problems` : undefined)}
      <Problems id={`${id}-problems`} messages={mine} />
    </div>
  );
}

/** A JSON schema typed as text: parsed as it is typed, its mistakes (line and column) said under it. */
function SchemaText({ id, field, value, onChange, invalid, describedBy }) {
  const shown = v => (v === undefined ? '' : pretty(v));
  const [text, setText] = useState(shown(value));
  const [error, setError] = useState('');
  useEffect(() => { setText(shown(value)); setError(''); }, [JSON.stringify(value)]);     // eslint-disable-line react-hooks/exhaustive-deps
  return (
    <>
      <textarea id={id} rows={Math.min(8, Math.max(2, text.split('\n').length))} spellCheck="false" value={text}
        placeholder='{"type": "object", "properties": {}}' aria-invalid={invalid || Boolean(error)} aria-describedby={describedBy}
        onChange={e => {
          setText(e.target.value);
          if (!e.target.value.trim()) { setError(''); onChange(undefined); return; }
          try { const parsed = JSON.parse(e.target.value); setError(''); onChange(parsed); } catch (err) { setError(`${field}: ${jsonError(e.target.value, err)}`); }
        }} />
      {error ? <p className="field-error">{error}</p> : null}
    </>
  );
}

/** A tool's name: renamed when the new name is free, else the field says why and the tool keeps its name. */
function ToolName({ id, name, taken, field, onRename, messages }) {
  const [text, setText] = useState(name);
  useEffect(() => setText(name), [name]);
  const problem = !text.trim() ? `${field}: a tool needs its name on the server`
    : text !== name && taken.includes(text) ? `${field}: the server already lists a tool ${text}` : '';
  const all = [...(problem ? [{ field, message: problem }] : []), ...messages];
  return (
    <Row id={id} label="Tool name" field={field} messages={all}>
      {(invalid, describedBy) => <input id={id} type="text" value={text} aria-invalid={invalid || undefined} aria-describedby={describedBy}
        onChange={e => { setText(e.target.value); if (e.target.value.trim() && !taken.includes(e.target.value)) onRename(e.target.value); }} />}
    </Row>
  );
}

function ServerTools({ entry, i, prefix, messages, onChange }) {
  const tools = isObject(entry.tools) ? entry.tools : {};
  const names = Object.keys(tools);
  const [fresh, setFresh] = useState('');
  const [freshProblem, setFreshProblem] = useState('');
  const where = `params.mcp.${i}.tools`;
  const rename = (old, name) => onChange(Object.fromEntries(Object.entries(tools).map(([k, v]) => (k === old ? [name, isObject(v) ? { ...v, name } : v] : [k, v]))));
  const set = (name, meta) => onChange({ ...tools, [name]: meta });
  const add = () => {
    const name = fresh.trim();
    if (!name) { setFreshProblem(`${where}: name the tool to add (its name on the server)`); return; }
    if (names.includes(name)) { setFreshProblem(`${where}.${name}: the server already lists a tool ${name}`); return; }
    setFreshProblem('');
    setFresh('');
    onChange({ ...tools, [name]: { name, description: '', inputSchema: { type: 'object', properties: {} } } });
  };
  return (
    <div className="mcp-tools">
      {names.length ? null : <p className="muted">No tools: the Agent calls none of this server's tools (and needs no config for it).</p>}
      {names.map((name, t) => {
        const meta = isObject(tools[name]) ? tools[name] : {};
        const field = `${where}.${name}`;
        const id = `${prefix}-mcp-${i}-tool-${t}`;
        return (
          <fieldset key={t} className="mcp-tool">
            <legend>Tool {name}</legend>
            <ToolName id={`${id}-name`} name={name} taken={names} field={field} onRename={n => rename(name, n)}
              messages={messages.filter(m => m.field === field)} />
            <Row id={`${id}-description`} label="Description" field={`${field}.description`} messages={messages}>
              {(invalid, describedBy) => <textarea id={`${id}-description`} rows={2} value={meta.description || ''} aria-invalid={invalid || undefined}
                aria-describedby={describedBy} onChange={e => set(name, { ...meta, description: e.target.value })} />}
            </Row>
            <Row id={`${id}-schema`} label="Input schema (JSON)" field={`${field}.inputSchema`} messages={messages}>
              {(invalid, describedBy) => <SchemaText id={`${id}-schema`} field={`${field}.inputSchema`} value={meta.inputSchema !== undefined ? meta.inputSchema : meta.input_schema}
                invalid={invalid} describedBy={describedBy}
                onChange={v => { const next = { ...meta, inputSchema: v }; delete next.input_schema; if (v === undefined) delete next.inputSchema; set(name, next); }} />}
            </Row>
            <div className="buttons">
              <button type="button" className="danger" onClick={() => onChange(Object.fromEntries(Object.entries(tools).filter(([k]) => k !== name)))}>
                Remove tool {name}</button>
            </div>
          </fieldset>
        );
      })}
      <div className="buttons">
        <label htmlFor={`${prefix}-mcp-${i}-new-tool`} className="inline-label">New tool</label>
        <input id={`${prefix}-mcp-${i}-new-tool`} type="text" value={fresh} aria-invalid={Boolean(freshProblem) || undefined}
          aria-describedby={freshProblem ? `${prefix}-mcp-${i}-new-tool-problem` : undefined}
          onChange={e => setFresh(e.target.value)} onKeyDown={e => { if (e.key === 'Enter') { e.preventDefault(); add(); } }} />
        <button type="button" onClick={add}>Add tool to server {i + 1}</button>
      </div>
      {freshProblem ? <p id={`${prefix}-mcp-${i}-new-tool-problem`} className="field-error">{freshProblem}</p> : null}
    </div>
  );
}

/** The `mcp` param of an Agent: a list of servers, each with its own fields. */
export function McpField({ value, onChange, problems, prefix }) {
  const servers = Array.isArray(value) ? value : [];
  const change = (i, entry) => onChange(servers.map((s, j) => (j === i ? entry : s)));
  // what the check said about params.mcp..., and what is wrong as typed (said at once, the check follows)
  const checked = problems.filter(p => (p.field || '') === 'params.mcp' || (p.field || '').startsWith('params.mcp.'));
  return (
    <fieldset className="mcp-field" data-field="params.mcp">
      <legend>MCP servers <code className="key">mcp</code></legend>
      {value !== undefined && !Array.isArray(value) ? <p className="field-error">params.mcp: must be a list of MCP servers; adding one replaces it.</p> : null}
      <Problems id={`${prefix}-mcp-problems`} messages={checked.filter(p => p.field === 'params.mcp')} />
      {servers.map((entry, i) => {
        const typed = mcpProblems(entry, i).map(([field, message]) => ({ field, message, severity: 'error' }));
        const said = new Set(typed.map(m => m.field));
        const messages = [...typed, ...checked.filter(p => !said.has(p.field) && (p.field === `params.mcp.${i}` || p.field.startsWith(`params.mcp.${i}.`)))];
        const obj = isObject(entry) ? entry : {};
        const id = `${prefix}-mcp-${i}`;
        return (
          <details key={i} className="mcp-server" open>
            <summary>MCP server {i + 1}{obj.mcp_id ? `: ${obj.mcp_id}` : ''}</summary>
            <Problems id={`${id}-entry-problems`} messages={messages.filter(m => m.field === `params.mcp.${i}`)} />
            <Row id={`${id}-id`} label={`Server id (mcp_id) of server ${i + 1}`} field={`params.mcp.${i}.mcp_id`} messages={messages}>
              {(invalid, describedBy) => <input id={`${id}-id`} type="text" value={typeof obj.mcp_id === 'string' ? obj.mcp_id : ''}
                aria-invalid={invalid || undefined} aria-describedby={describedBy} onChange={e => change(i, { ...obj, mcp_id: e.target.value })} />}
            </Row>
            <Problems id={`${id}-tools-problems`} messages={messages.filter(m => m.field === `params.mcp.${i}.tools`)} />
            <ServerTools entry={obj} i={i} prefix={prefix} messages={messages} onChange={tools => change(i, { ...obj, tools })} />
            <div className="buttons">
              <button type="button" className="danger" onClick={() => onChange(servers.filter((_, j) => j !== i))}>
                Remove MCP server {i + 1}{obj.mcp_id ? ` (${obj.mcp_id})` : ''}</button>
            </div>
          </details>
        );
      })}
      <div className="buttons">
        <button type="button" onClick={() => onChange([...servers, { mcp_id: '', tools: {} }])}>Add MCP server</button>
      </div>
    </fieldset>
  );
}
