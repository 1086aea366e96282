// The agent's other doors: its MCP, A2A and LangGraph API URLs, each with a client snippet to copy
// (GET /api/v1/agents/<id> answers them under `endpoints`; docs/protocols.md). Self-contained: the run
// page adds `endpointsPanel(agent)` and nothing else depends on it.
import { h, notify } from './dom.js';

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

function entry(key, label, rows, endpoint) {
  const snippet = h('pre', { class: 'endpoint-snippet', tabindex: '0', 'aria-label': `${label} client snippet` },
    endpoint.snippet || '');
  return h('div', { class: 'endpoint', dataset: { protocol: key } },
    h('h3', {}, label),
    h('dl', {}, rows.map(([name, value]) => [h('dt', {}, name), h('dd', {}, h('code', {}, value || ''))])),
    snippet,
    h('button', { type: 'button', onclick: () => copy(endpoint.snippet || '', `The ${label} snippet`) }, 'Copy snippet'));
}

/** A collapsed panel with the agent's protocol URLs and snippets, or null when the server sent none. */
export function endpointsPanel(agent) {
  const endpoints = agent && agent.endpoints;
  if (!endpoints) return null;
  return h('details', { class: 'card endpoints' },
    h('summary', {}, 'Use this agent over MCP, A2A or LangGraph'),
    h('p', { class: 'muted' }, 'The snippets read your token from $C2G_TOKEN; run them with `python -m asyncio`.'),
    PROTOCOLS.filter(([key]) => endpoints[key]).map(([key, label, rows]) => entry(key, label, rows(endpoints[key]), endpoints[key])));
}
