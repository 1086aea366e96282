// The canvas as React Flow draws it, made from a DSL: one node per component (Iteration and Loop bodies
// as groups holding their children), an Agent's tools and sub-agents, RAGFlow's notes, and the edges of
// `downstream`. Positions come from the DSL's `graph.nodes` (RAGFlow keeps them there); a DSL without
// them is laid out left to right with dagre.
import dagre from '@dagrejs/dagre';
import { componentsOf, typeOf } from './util.js';

export const SIZE = { width: 200, height: 58 };
const TOOL_SIZE = { width: 180, height: 44 };
const NOTE_SIZE = { width: 200, height: 90 };
const CONTAINERS = new Set(['Iteration', 'Loop']);
const PAD = { x: 30, top: 50, bottom: 30 };
export const ROUTE_HEIGHT = 22;          // one branch of a router (a row with its handle)

/** The id of the edge a router's branch `label` draws to `target`: "Categorize:Route[yes]->LLM:Md". */
export const routeEdgeId = (source, label, target) => `${source}[${label}]->${target}`;

export const isContainer = type => CONTAINERS.has(type);

// RAGFlow's node type for each component (its canvas's NodeMap); any other is a "ragNode"
const RAGFLOW_TYPES = { Begin: 'beginNode', Categorize: 'categorizeNode', Retrieval: 'retrievalNode', Message: 'messageNode',
  Switch: 'switchNode', Iteration: 'iterationNode', IterationItem: 'iterationStartNode', Agent: 'agentNode', Note: 'noteNode',
  DataOperations: 'dataOperationsNode', ListOperations: 'listOperationsNode', VariableAssigner: 'variableAssignerNode',
  VariableAggregator: 'variableAggregatorNode', Loop: 'loopNode', LoopItem: 'loopStartNode', ExitLoop: 'exitLoopNode' };

/** RAGFlow's node type for a component ("Agent" -> "agentNode"; most tools are "ragNode"). */
export function ragflowNodeType(type) {
  return RAGFLOW_TYPES[type] || 'ragNode';
}

function graphNodes(dsl) {
  const nodes = (dsl && dsl.graph && Array.isArray(dsl.graph.nodes)) ? dsl.graph.nodes : [];
  return new Map(nodes.filter(n => n && n.id).map(n => [n.id, n]));
}

/** The tools an Agent's params name, and its sub-agents (tools whose component is an Agent). */
export function agentTools(cpn) {
  const params = (cpn && cpn.obj && cpn.obj.params) || {};
  const tools = Array.isArray(params.tools) ? params.tools : [];
  const mcp = Array.isArray(params.mcp) ? params.mcp : [];
  return {
    tools: tools.filter(t => t && t.component_name !== 'Agent').map(t => t.name || t.component_name || 'tool'),
    subAgents: tools.filter(t => t && t.component_name === 'Agent'),
    mcp: mcp.map(m => (m && (m.name || m.mcp_id || m.id)) || 'MCP server'),
  };
}

const list = v => (Array.isArray(v) ? v : typeof v === 'string' && v ? [v] : []);

/** RAGFlow's handle of a Switch's else branch (its SwitchElseTo), and of case i ("Case 1", "Case 2"...). */
export const SWITCH_ELSE = 'end_cpn_ids';
export const switchCase = i => `Case ${i + 1}`;

/** The handle ids RAGFlow gave a Categorize's categories: the `uuid` of each of its graph node's
 * `data.form.items`, by category name. */
function categoryUuids(graphNode) {
  const items = graphNode && graphNode.data && graphNode.data.form && graphNode.data.form.items;
  return new Map((Array.isArray(items) ? items : []).filter(i => i && typeof i.name === 'string' && i.uuid).map(i => [i.name, String(i.uuid)]));
}

/** A router's branches as RAGFlow's canvas draws them, one source handle each: a Categorize's categories
 * (handle: the category's uuid in the graph node's `items`, else its name), a Switch's cases ("Case 1"...)
 * and its else ("end_cpn_ids"). Each: {handle, label, targets, key} (key: the category name, or the case's
 * index, or "else"). Other components have none. */
export function routesOf(cpn, graphNode) {
  const params = (cpn && cpn.obj && cpn.obj.params) || {};
  if (typeOf(cpn) === 'Categorize') {
    const uuids = categoryUuids(graphNode);
    const cats = params.category_description && typeof params.category_description === 'object' && !Array.isArray(params.category_description)
      ? params.category_description : {};
    // in the order of the node's items, as RAGFlow draws them, then those its items do not hold
    const known = [...uuids.keys()].filter(n => Object.hasOwn(cats, n));
    return [...known, ...Object.keys(cats).filter(n => !uuids.has(n))]
      .map(name => ({ handle: uuids.get(name) || name, label: name.trim() || name, targets: list(cats[name] && cats[name].to), key: name }));
  }
  if (typeOf(cpn) === 'Switch') {
    const cases = (Array.isArray(params.conditions) ? params.conditions : [])
      .map((c, i) => ({ handle: switchCase(i), label: switchCase(i), targets: list(c && c.to), key: i }));
    return [...cases, { handle: SWITCH_ELSE, label: 'Else', targets: list(params.end_cpn_ids), key: 'else' }];
  }
  return [];
}

/** Every node to draw: {id, kind: component|tool|agent|note, type, label, parentId, position?, width, height}. */
export function canvasItems(dsl) {
  const components = componentsOf(dsl);
  const saved = graphNodes(dsl);
  const items = [];
  const edges = [];
  const seen = new Set();
  const label = (id, cpn) => {
    const g = saved.get(id);
    return (g && g.data && g.data.name) || (cpn && cpn.obj && cpn.obj.params && cpn.obj.params.name) || id;
  };
  for (const [id, cpn] of Object.entries(components)) {
    const type = typeOf(cpn);
    const routes = routesOf(cpn, saved.get(id)).map(({ handle, label: text }) => ({ handle, label: text }));
    items.push({ id, kind: 'component', type, label: label(id, cpn), parentId: cpn && cpn.parent_id && components[cpn.parent_id] ? cpn.parent_id : undefined,
      ...(isContainer(type) ? {} : SIZE), ...(routes.length ? { routes, height: SIZE.height + ROUTE_HEIGHT * routes.length } : {}) });
    seen.add(id);
  }
  // an Agent's tools and sub-agents (sub-agents may have their own), as RAGFlow draws them below it
  const addTools = (ownerId, cpn) => {
    const { tools, subAgents, mcp } = agentTools(cpn);
    const names = [...tools, ...mcp.map(m => `MCP: ${m}`)];
    if (names.length) {
      const drawn = [...saved.values()].find(n => n.type === 'toolNode' && (dsl.graph.edges || []).some(e => e.source === ownerId && e.target === n.id));
      const id = drawn ? drawn.id : `${ownerId}::tools`;
      if (!seen.has(id)) {
        items.push({ id, kind: 'tool', type: 'Tools', label: names.join(', '), owner: ownerId, ...TOOL_SIZE });
        edges.push({ id: `${ownerId}->${id}`, source: ownerId, target: id, kind: 'tool' });
        seen.add(id);
      }
    }
    subAgents.forEach((sub, i) => {
      const id = sub.id || `${ownerId}::agent${i}`;
      if (seen.has(id)) return;
      items.push({ id, kind: 'agent', type: 'Agent', label: sub.name || label(id, null), owner: ownerId, ...SIZE });
      edges.push({ id: `${ownerId}->${id}`, source: ownerId, target: id, kind: 'agent' });
      seen.add(id);
      addTools(id, { obj: { params: sub.params || {} } });
    });
  };
  for (const [id, cpn] of Object.entries(components)) if (typeOf(cpn) === 'Agent') addTools(id, cpn);
  for (const [id, g] of saved) {
    if (seen.has(id) || g.type !== 'noteNode') continue;
    const form = (g.data && g.data.form) || {};
    items.push({ id, kind: 'note', type: 'Note', label: (g.data && g.data.name) || 'Note', text: String(form.text || ''), ...NOTE_SIZE });
    seen.add(id);
  }
  for (const [id, cpn] of Object.entries(components)) {
    // a router's edges leave from the handle of their branch (one edge per branch and target, as RAGFlow
    // draws them); a `downstream` link no branch names leaves from the box itself
    const routed = new Set();
    for (const r of routesOf(cpn, saved.get(id))) {
      for (const next of new Set(r.targets)) {
        if (!components[next] || next === id) continue;
        routed.add(next);
        edges.push({ id: routeEdgeId(id, r.label, next), source: id, sourceHandle: r.handle, target: next, kind: 'flow', route: r.label });
      }
    }
    for (const next of new Set((cpn && cpn.downstream) || [])) {
      if (!components[next] || next === id || routed.has(next)) continue;
      edges.push({ id: `${id}->${next}`, source: id, target: next, kind: 'flow' });
    }
  }
  return { items, edges, saved };
}

/** Positions for every item: the saved ones where all components have one, else a dagre layout, left to
 * right by default as RAGFlow draws (`rankdir: 'TB'` for top to bottom). */
export function layout(dsl, { rankdir = 'LR' } = {}) {
  const { items, edges, saved } = canvasItems(dsl);
  const comps = items.filter(i => i.kind === 'component');
  const allSaved = comps.length > 0 && comps.every(i => saved.has(i.id) && saved.get(i.id).position);
  if (allSaved) {
    for (const item of items) {
      const g = saved.get(item.id);
      if (g && g.position) item.position = { x: Number(g.position.x) || 0, y: Number(g.position.y) || 0 };
      if (g && g.width && isContainer(item.type)) { item.width = g.width; item.height = g.height; }
      if (g && g.measured && isContainer(item.type)) { item.width = g.measured.width; item.height = g.measured.height; }
    }
    placeMissing(items);
    sizeContainers(items);
    return { items, edges, direction: 'LR' };        // RAGFlow draws left to right
  }
  // top to bottom, a router's branches sit side by side along its bottom edge (one row)
  if (rankdir === 'TB') for (const item of items) if (item.routes) item.height = SIZE.height + ROUTE_HEIGHT;
  dagreLayout(items, edges, rankdir);
  return { items, edges, direction: rankdir };
}

function placeMissing(items) {
  // tools and sub-agents that the saved graph does not hold go under their owner
  const byId = new Map(items.map(i => [i.id, i]));
  const counts = new Map();
  for (const item of items) {
    if (item.position) continue;
    const owner = item.owner && byId.get(item.owner);
    const n = counts.get(item.owner) || 0;
    counts.set(item.owner, n + 1);
    item.position = owner && owner.position ? { x: owner.position.x + n * 210, y: owner.position.y + 120 } : { x: n * 210, y: -150 };
  }
}

function sizeContainers(items) {
  for (const group of items.filter(i => isContainer(i.type))) {
    const children = items.filter(i => i.parentId === group.id);
    const right = Math.max(0, ...children.map(c => c.position.x + c.width));
    const bottom = Math.max(0, ...children.map(c => c.position.y + c.height));
    group.width = Math.max(group.width || 0, right + PAD.x, 320);
    group.height = Math.max(group.height || 0, bottom + PAD.bottom, 160);
  }
}

// a container's body is laid out top to bottom (a group is taller than wide in RAGFlow's canvas too)
function dagreGraph(rankdir = 'TB') {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir, nodesep: 30, ranksep: 45, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  return g;
}

function dagreLayout(items, edges, rankdir) {
  // a container's children first (a small graph of their own), which gives the container its size
  for (const group of items.filter(i => isContainer(i.type))) {
    const children = items.filter(i => i.parentId === group.id);
    const g = dagreGraph();
    for (const c of children) g.setNode(c.id, { width: c.width, height: c.height });
    for (const e of edges) if (g.hasNode(e.source) && g.hasNode(e.target)) g.setEdge(e.source, e.target);
    dagre.layout(g);
    for (const c of children) {
      const n = g.node(c.id);
      c.position = { x: n.x - c.width / 2 + PAD.x - 10, y: n.y - c.height / 2 + PAD.top - 10 };
    }
    const size = g.graph();
    group.width = Math.max(320, (size.width || 0) + 2 * PAD.x);
    group.height = Math.max(160, (size.height || 0) + PAD.top + PAD.bottom);
  }
  const top = items.filter(i => !i.parentId);
  const g = dagreGraph(rankdir);
  for (const i of top) g.setNode(i.id, { width: i.width, height: i.height });
  const ids = new Set(top.map(i => i.id));
  // dagre keeps the targets of one source in the reverse order their edges were added: added last to
  // first, a router's targets come out in the order of its branches, and its branch edges do not cross
  for (const e of [...edges].reverse()) if (ids.has(e.source) && ids.has(e.target)) g.setEdge(e.source, e.target);
  dagre.layout(g);
  for (const i of top) {
    const n = g.node(i.id);
    i.position = { x: n.x - i.width / 2, y: n.y - i.height / 2 };
  }
}
