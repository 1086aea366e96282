// Edits of a DSL as the canvas editor makes them, each a pure function from one DSL to the next (which
// is what makes undo and redo a list of DSLs). `components` stays what the engine runs; `graph` (nodes
// and edges, RAGFlow's React Flow state) is kept in step so RAGFlow's canvas opens the result: a node's
// position, its RAGFlow node type and `data.form` (its params), and one edge per `downstream` link.
import { layout, ragflowNodeType, SIZE, isContainer } from './graphmodel.js';
import { componentsOf, typeOf } from './util.js';

const clone = value => (typeof structuredClone === 'function' ? structuredClone(value) : JSON.parse(JSON.stringify(value)));
const START_OF = { Iteration: 'IterationItem', Loop: 'LoopItem' };

export function emptyDsl() {
  return {
    components: { begin: { obj: { component_name: 'Begin', params: { mode: 'conversational', prologue: 'Hi! How can I help?' } }, downstream: [], upstream: [] } },
    graph: { nodes: [graphNode('begin', 'Begin', { mode: 'conversational', prologue: 'Hi! How can I help?' }, { x: 50, y: 200 })], edges: [] },
    history: [], path: [], retrieval: [], globals: {},
  };
}

function graphNode(id, type, params, position, parentId) {
  const node = { id, type: ragflowNodeType(type), position: { ...position },
    data: { label: type, name: id, form: clone(params || {}) },
    sourcePosition: 'left', targetPosition: 'right', measured: { width: SIZE.width, height: isContainer(type) ? 160 : 48 } };
  if (parentId) Object.assign(node, { parentId, extent: 'parent' });
  return node;
}

export function edgeId(source, target, sourceHandle = 'start', targetHandle = 'end') {
  return `xy-edge__${source}${sourceHandle}-${target}${targetHandle}`;
}

function graphOf(dsl) {
  if (!dsl.graph || typeof dsl.graph !== 'object') dsl.graph = {};
  if (!Array.isArray(dsl.graph.nodes)) dsl.graph.nodes = [];
  if (!Array.isArray(dsl.graph.edges)) dsl.graph.edges = [];
  return dsl.graph;
}

/** The DSL with a graph node for every component (laid out where it had none); unchanged when all have one. */
export function materialize(dsl) {
  const components = componentsOf(dsl);
  const have = new Set(((dsl.graph && dsl.graph.nodes) || []).map(n => n && n.id));
  const missing = Object.keys(components).filter(id => !have.has(id));
  if (!missing.length) return dsl;
  const out = clone(dsl);
  const graph = graphOf(out);
  const drawn = new Map(layout(out, { rankdir: 'LR' }).items.map(i => [i.id, i]));       // as RAGFlow draws
  for (const id of missing) {
    const cpn = components[id];
    const item = drawn.get(id) || { position: { x: 0, y: 0 } };
    graph.nodes.push(graphNode(id, typeOf(cpn), (cpn.obj || {}).params, item.position || { x: 0, y: 0 }, cpn.parent_id));
  }
  const edges = new Set(graph.edges.map(e => `${e.source}->${e.target}`));
  for (const [id, cpn] of Object.entries(components)) {
    for (const next of (cpn && cpn.downstream) || []) {
      if (components[next] && !edges.has(`${id}->${next}`)) graph.edges.push({ id: edgeId(id, next), source: id, sourceHandle: 'start', target: next, targetHandle: 'end', data: { isHovered: false } });
    }
  }
  return out;
}

/** Move nodes: {id: {x, y}} (positions relative to their group, as React Flow and RAGFlow keep them). */
export function moveNodes(dsl, positions) {
  const out = clone(dsl);
  const graph = graphOf(out);
  for (const [id, position] of Object.entries(positions)) {
    const node = graph.nodes.find(n => n.id === id);
    if (node) node.position = { x: Math.round(position.x * 100) / 100, y: Math.round(position.y * 100) / 100 };
  }
  return out;
}

/** A new id for a component of `type`: "LLM:2", "LLM:3"... (RAGFlow's style, `Type:Suffix`). */
export function newId(dsl, type) {
  const taken = new Set([...Object.keys(componentsOf(dsl)), ...((dsl.graph && dsl.graph.nodes) || []).map(n => n.id)]);
  for (let n = 1; ; n++) {
    const id = `${type}:${n}`;
    if (!taken.has(id)) return id;
  }
}

/** A free spot near `position`: moved right and down past the boxes already there. */
export function freeSpot(dsl, position, parentId, rects = null) {
  const taken = rects || ((dsl.graph && dsl.graph.nodes) || []).filter(n => (n.parentId || undefined) === parentId && n.position)
    .map(n => ({ x: n.position.x, y: n.position.y, w: SIZE.width, h: SIZE.height }));
  let spot = { ...position };
  for (let i = 0; i < 50; i++) {
    const hit = taken.some(r => spot.x < r.x + r.w + 20 && r.x < spot.x + SIZE.width + 20 && spot.y < r.y + r.h + 20 && r.y < spot.y + SIZE.height + 20);
    if (!hit) return spot;
    spot = i % 4 === 3 ? { x: position.x, y: spot.y + SIZE.height + 30 } : { x: spot.x + SIZE.width + 40, y: spot.y };
  }
  return spot;
}

/** Add a component of `type` with the params' defaults at `position`, inside `parentId` when given. An
 * Iteration or Loop comes with its start item inside; `rects` ({x, y, w, h}) are the boxes to keep clear of.
 * Returns [dsl, id]. */
export function addComponent(dsl, type, params, position, parentId, rects = null) {
  const out = clone(dsl);
  const id = newId(out, type);
  const entry = { obj: { component_name: type, params: clone(params || {}) }, downstream: [], upstream: [] };
  if (parentId) entry.parent_id = parentId;
  out.components = { ...componentsOf(out), [id]: entry };
  graphOf(out).nodes.push(graphNode(id, type, params, freeSpot(out, position, parentId, rects), parentId));
  if (START_OF[type]) {
    const start = newId(out, START_OF[type]);
    out.components[start] = { obj: { component_name: START_OF[type], params: {} }, downstream: [], upstream: [], parent_id: id };
    out.graph.nodes.push(graphNode(start, START_OF[type], {}, { x: 30, y: 50 }, id));
  }
  return [out, id];
}

/** Delete components (a group with what it holds) and the edges that touch them. */
export function deleteComponents(dsl, ids) {
  const out = clone(dsl);
  const components = componentsOf(out);
  const gone = new Set(ids);
  for (const [id, cpn] of Object.entries(components)) if (cpn && gone.has(cpn.parent_id)) gone.add(id);
  for (const id of gone) delete components[id];
  for (const cpn of Object.values(components)) {
    if (Array.isArray(cpn.downstream)) cpn.downstream = cpn.downstream.filter(d => !gone.has(d));
    if (Array.isArray(cpn.upstream)) cpn.upstream = cpn.upstream.filter(u => !gone.has(u));
  }
  const graph = graphOf(out);
  graph.nodes = graph.nodes.filter(n => !gone.has(n.id) && !gone.has(n.parentId));
  graph.edges = graph.edges.filter(e => !gone.has(e.source) && !gone.has(e.target));
  return out;
}

/** Connect `source` to `target` (downstream / upstream and a graph edge); a link that exists stays one. */
export function connect(dsl, source, target) {
  const components = componentsOf(dsl);
  if (!components[source] || !components[target] || source === target) return dsl;
  const out = clone(dsl);
  const from = out.components[source];
  const to = out.components[target];
  from.downstream = [...new Set([...(from.downstream || []), target])];
  to.upstream = [...new Set([...(to.upstream || []), source])];
  const graph = graphOf(out);
  if (!graph.edges.some(e => e.source === source && e.target === target)) {
    graph.edges.push({ id: edgeId(source, target), source, sourceHandle: 'start', target, targetHandle: 'end', data: { isHovered: false } });
  }
  return out;
}

/** Remove the link `source` -> `target`. */
export function disconnect(dsl, source, target) {
  const out = clone(dsl);
  const components = componentsOf(out);
  if (components[source]) components[source].downstream = (components[source].downstream || []).filter(d => d !== target);
  if (components[target]) components[target].upstream = (components[target].upstream || []).filter(u => u !== source);
  const graph = graphOf(out);
  graph.edges = graph.edges.filter(e => !(e.source === source && e.target === target));
  return out;
}

/** Replace a component's params (and its graph node's form, which RAGFlow's canvas edits). */
export function setParams(dsl, id, params) {
  const out = clone(dsl);
  const cpn = componentsOf(out)[id];
  if (!cpn) return dsl;
  cpn.obj = { ...(cpn.obj || {}), params: clone(params) };
  const node = graphOf(out).nodes.find(n => n.id === id);
  if (node) node.data = { ...(node.data || {}), form: { ...((node.data && node.data.form) || {}), ...clone(params) } };
  return out;
}
