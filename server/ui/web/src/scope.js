// What a component can reference, as RAGFlow's variable picker offers it (its useBuildQueryVariableOptions):
// the system variables (`sys.*`), the conversation variables (`env.*`, the DSL's `variables` and
// `globals`), Begin's inputs, and the outputs of every component upstream of it (transitively, along
// `downstream`), each with its type. Inside an Iteration: its item and index (the IterationItem's outputs)
// and what the Iteration itself can reach; inside a Loop, and in the Loop's own stop condition, its variables.
//
// A component's outputs come from the server (GET /components: `outputs`, what its params model
// declares, nodes/schemas.py) and from its params where they depend on them: Begin's and a UserFillUp's
// form (`inputs`), the `outputs` RAGFlow's canvas keeps in a component's params, a Loop's `loop_variables`,
// a VariableAggregator's groups.
//
// A reference is written as RAGFlow saves it: `sys.query`, `env.name`, `Component:Id@output`; inside
// text it is braced (`{LLM:Billing@content}`), in a field that holds one reference it is bare.
import { componentsOf, typeOf } from './util.js';

/** The system variables every run sets (SPEC §1 `globals`, RAGFlow's AgentGlobals). */
export const SYSTEM_VARIABLES = [
  { name: 'sys.query', type: 'string' },
  { name: 'sys.user_id', type: 'string' },
  { name: 'sys.conversation_turns', type: 'number' },
  { name: 'sys.files', type: 'Array<File>' },
  { name: 'sys.history', type: 'Array<string>' },
  { name: 'sys.date', type: 'string' },
];

// RAGFlow's Begin field types as its picker types them (BeginQueryTypeMap)
const FIELD_TYPES = { line: 'string', paragraph: 'string', options: 'string', file: 'Array<File>', integer: 'number',
  float: 'number', number: 'number', boolean: 'boolean', object: 'object' };

/** A reference inside text, with RAGFlow's engine's pattern (SPEC §4.1): group 1 is the reference. */
export const REF_IN_TEXT = /\{([a-zA-Z0-9_:]+@[A-Za-z0-9_.-]+|sys\.[A-Za-z0-9_.]+|env\.[A-Za-z0-9_.]+)\}/g;

/** `{x}` or `x` -> `x` (the bare reference a single-reference field keeps). */
export const bareRef = value => String(value || '').trim().replace(/^\{+\s*/, '').replace(/\s*\}+$/, '');

const graphNodes = dsl => ((dsl && dsl.graph && dsl.graph.nodes) || []);

/** The name RAGFlow's canvas shows for a component: its graph node's `data.name`, else its id. */
export function displayName(dsl, id) {
  const node = graphNodes(dsl).find(n => n && n.id === id);
  const name = node && node.data && typeof node.data.name === 'string' && node.data.name.trim();
  return name || id;
}

/** How a reference reads on a chip: "Billing › content", "sys.query". */
export function refLabel(dsl, ref) {
  const bare = bareRef(ref);
  const at = bare.indexOf('@');
  if (at < 0) return bare;
  const id = bare.slice(0, at);
  return `${id === 'begin' ? 'Begin' : displayName(dsl, id)} › ${bare.slice(at + 1)}`;
}

const typeOfOutput = v => (v && typeof v === 'object' && typeof v.type === 'string' ? v.type : 'any');

/** The outputs of one component: [{name, type}], the declared ones first, then those its params add. */
export function outputsOf(cpn, spec) {
  const params = (cpn && cpn.obj && cpn.obj.params) || {};
  const out = new Map();
  for (const o of (spec && spec.outputs) || []) out.set(o.name, o.type || 'any');
  const type = typeOf(cpn);
  if (type === 'Begin' || type === 'UserFillUp') {
    for (const [key, field] of Object.entries(params.inputs && typeof params.inputs === 'object' ? params.inputs : {})) {
      out.set(key, FIELD_TYPES[String((field && field.type) || 'line').toLowerCase()] || 'string');
    }
  }
  if (type === 'Loop') {
    for (const v of Array.isArray(params.loop_variables) ? params.loop_variables : []) {
      if (v && typeof v.variable === 'string' && v.variable) out.set(v.variable, v.type || 'any');
    }
  }
  if (type === 'VariableAggregator') {            // one output per group, named by it (SPEC 3.11)
    for (const g of Array.isArray(params.groups) ? params.groups : []) {
      if (g && typeof g.group_name === 'string' && g.group_name) out.set(g.group_name, g.type || 'any');
    }
  }
  if (params.outputs && typeof params.outputs === 'object' && !Array.isArray(params.outputs)) {
    for (const [name, v] of Object.entries(params.outputs)) if (!name.startsWith('_') && !out.has(name)) out.set(name, typeOfOutput(v));
  }
  return [...out].filter(([name]) => !name.startsWith('_')).map(([name, t]) => ({ name, type: t }));
}

/** The ids of the components upstream of `id` (transitively), nearest first: whatever names `id` (or an
 * upstream one) in its `downstream` or `upstream` lists. */
export function upstreamOf(dsl, id) {
  const components = componentsOf(dsl);
  const parents = new Map(Object.keys(components).map(k => [k, new Set()]));
  for (const [from, cpn] of Object.entries(components)) {
    for (const to of (cpn && cpn.downstream) || []) if (parents.has(to)) parents.get(to).add(from);
    for (const up of (cpn && cpn.upstream) || []) if (components[up]) parents.get(from).add(up);
  }
  const seen = new Set([id]);
  const order = [];
  let frontier = [id];
  while (frontier.length) {
    const next = [];
    for (const at of frontier) {
      for (const p of parents.get(at) || []) if (!seen.has(p)) { seen.add(p); order.push(p); next.push(p); }
    }
    frontier = next;
  }
  return order;
}

/** The conversation variables: [{name: 'env.x', type}] from the DSL's `variables` and `globals`. */
export function envVariables(dsl) {
  const out = new Map();
  const declared = dsl && dsl.variables && typeof dsl.variables === 'object' && !Array.isArray(dsl.variables) ? dsl.variables : {};
  for (const [key, v] of Object.entries(declared)) {
    const name = (v && typeof v.name === 'string' && v.name) || key;
    out.set(name.startsWith('env.') ? name : `env.${name}`, (v && v.type) || 'string');
  }
  for (const [key, value] of Object.entries((dsl && dsl.globals) || {})) {
    if (key.startsWith('env.') && !out.has(key)) out.set(key, Array.isArray(value) ? 'Array<any>' : value === null ? 'any' : typeof value);
  }
  return [...out].map(([name, type]) => ({ name, type }));
}

/**
 * What `id` can reference: [{title, options: [{ref, label, type, group}]}], groups in picker order
 * (Begin's inputs, the enclosing Iteration / Loop, upstream components nearest first, the system and
 * conversation variables). `specs` maps component_name -> its /components entry.
 */
export function scopeOf(dsl, id, specs) {
  const components = componentsOf(dsl);
  const groups = [];
  const option = (ref, label, type, group) => ({ ref, label, type, group });
  const groupOf = (cid, title) => {
    const cpn = components[cid];
    const outs = outputsOf(cpn, specs[typeOf(cpn)]);
    if (outs.length) groups.push({ title, options: outs.map(o => option(`${cid}@${o.name}`, refLabel(dsl, `${cid}@${o.name}`), o.type, title)) });
  };
  // the chain of enclosing containers (an Iteration inside a Loop...), innermost first
  const chain = [];
  for (let at = components[id] && components[id].parent_id; at && components[at] && !chain.includes(at); at = components[at].parent_id) chain.push(at);
  const seen = new Set();
  const upstream = [];
  for (const from of [id, ...chain]) {
    for (const up of upstreamOf(dsl, from)) if (!seen.has(up) && up !== id && !chain.includes(up)) { seen.add(up); upstream.push(up); }
  }
  if (components.begin && upstream.includes('begin')) groupOf('begin', 'Begin');
  // a Loop's own variables: its termination condition reads them
  if (typeOf(components[id]) === 'Loop') groupOf(id, `${displayName(dsl, id)} (loop variables)`);
  for (const container of chain) {
    const type = typeOf(components[container]);
    if (type === 'Iteration') {
      const start = Object.keys(components).find(k => components[k].parent_id === container && typeOf(components[k]) === 'IterationItem');
      if (start) groupOf(start, `${displayName(dsl, container)} (item)`);
    } else if (type === 'Loop') {
      groupOf(container, `${displayName(dsl, container)} (loop variables)`);
    }
  }
  for (const up of upstream) {
    const type = typeOf(components[up]);
    if (up === 'begin' || type === 'IterationItem') continue;
    groupOf(up, displayName(dsl, up));
  }
  groups.push({ title: 'System', options: SYSTEM_VARIABLES.map(v => option(v.name, v.name, v.type, 'System')) });
  const env = envVariables(dsl);
  if (env.length) groups.push({ title: 'Conversation variables', options: env.map(v => option(v.name, v.name, v.type, 'Conversation variables')) });
  return groups;
}

/** The options of `groups` whose label, reference or type contains `query` (case-insensitive), flat. */
export function filterScope(groups, query) {
  const q = String(query || '').trim().toLowerCase();
  const all = groups.flatMap(g => g.options);
  if (!q) return all;
  return all.filter(o => `${o.label} ${o.ref} ${o.type}`.toLowerCase().includes(q));
}
