// The agent's other doors: its MCP, A2A and LangGraph API URLs, each with a client snippet to copy
// (GET /api/v1/agents/<id> answers them under `endpoints`; docs/protocols.md). The run page shows
// `<EndpointsPanel agent={agent} />`; nothing else depends on it.
import { notify } from './common.jsx';

const PROTOCOLS = [
  ['mcp', 'MCP (streamable HTTP)', e => [['Agent', e.url], ['Every agent of the tenant', e.tenant_url]]],
  ['a2a', 'A2A (JSON-RPC)', e => [['Endpoint', e.url], ['Agent card', e.card_url]]],
  ['langgraph', "LangGraph's API (langgraph-sdk)", e => [['Client URL', e.url], ['Assistant id', e.assistant_id]]],
];

async function copy(text, what) {
  try {
    await navigator.clipboard.writeText(text);
    notify(`${what} copied.`);
  } catch {
    notify(`Copying is not allowed here: select the ${what.toLowerCase()} and copy it.`, 'warning');
  }
}

function Endpoint({ protocol, label, rows, endpoint }) {
  return (
    <div className="endpoint" data-protocol={protocol}>
      <h3>{label}</h3>
      <dl>
        {rows.map(([name, value]) => [<dt key={`${name}-t`}>{name}</dt>, <dd key={`${name}-d`}><code>{value || ''}</code></dd>])}
      </dl>
      <pre className="endpoint-snippet" tabIndex={0} aria-label={`${label} client snippet`}>{endpoint.snippet || ''}</pre>
      <button type="button" onClick={() => copy(endpoint.snippet || '', `The ${label} snippet`)}>Copy snippet</button>
    </div>
  );
}

/** A collapsed panel with the agent's protocol URLs and snippets, or nothing when the server sent none. */
export function EndpointsPanel({ agent }) {
  const endpoints = agent && agent.endpoints;
  if (!endpoints) return null;
  return (
    <details className="card endpoints">
      <summary>Use this agent over MCP, A2A or LangGraph</summary>
      <p className="muted">The snippets read your token from $C2G_TOKEN; run them with <code>python -m asyncio</code>.</p>
      {PROTOCOLS.filter(([key]) => endpoints[key]).map(([key, label, rows]) => (
        <Endpoint key={key} protocol={key} label={label} rows={rows(endpoints[key])} endpoint={endpoints[key]} />
      ))}
    </details>
  );
}
