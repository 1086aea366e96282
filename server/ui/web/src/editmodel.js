// Edits of a DSL as the canvas editor makes them, each a pure function from one DSL to the next (which
// is what makes undo and redo a list of DSLs). `components` stays what the engine runs; `graph` (nodes
// and edges, RAGFlow's React Flow state) is kept in step so RAGFlow's canvas opens the result: a node's
// position, its RAGFlow node type and `data.form` (its params), and one edge per `downstream` link.
import { layout, ragflowNodeType, routesOf, SIZE, isContainer } from './graphmodel.js';
import { friendlyName } from './palettemodel.js';
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

const uuid = () => (globalThis.crypto && crypto.randomUUID ? crypto.randomUUID() : `${Date.now().toString(16)}-${Math.random().toString(16).slice(2)}`);
const list = v => (Array.isArray(v) ? v : typeof v === 'string' && v ? [v] : []);

/** A Categorize's categories as RAGFlow's canvas keeps them in its graph node's `data.form.items`
 * ({name, description, examples: [{value}], uuid}): the uuid is the id of the category's handle, which
 * its edges leave from. A category keeps its uuid (found by name); a new one gets a new uuid. */
function categoryItems(params, old) {
  const cats = params && params.category_description && typeof params.category_description === 'object' && !Array.isArray(params.category_description)
    ? params.category_description : {};
  const byName = new Map((Array.isArray(old) ? old : []).filter(i => i && typeof i.name === 'string').map(i => [i.name, i]));
  // RAGFlow's order (the items') for the categories it knows, then the new ones
  const names = [...byName.keys()].filter(n => Object.hasOwn(cats, n));
  const ordered = [...names, ...Object.keys(cats).filter(n => !names.includes(n))].map(n => [n, cats[n]]);
  return ordered.map(([name, desc]) => {
    const was = byName.get(name) || {};
    const d = desc && typeof desc === 'object' ? desc : {};
    const examples = d.examples === undefined ? (was.examples || []) : list(d.examples).map(v => ({ value: typeof v === 'string' ? v : JSON.stringify(v) }));
    const item = { ...was, name, description: d.description === undefined ? (was.description || '') : d.description, examples, uuid: was.uuid || uuid() };
    delete item.to;
    return item;
  });
}

function graphNode(id, type, params, position, parentId, name = id) {
  const form = clone(params || {});
  if (type === 'Categorize') form.items = categoryItems(params, []);
  const node = { id, type: ragflowNodeType(type), position: { ...position },
    data: { label: type, name, form },
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
    const node = graphNode(id, typeOf(cpn), (cpn.obj || {}).params, item.position || { x: 0, y: 0 }, cpn.parent_id);
    if (node.data.form.items) node.data.form.items = inTargetOrder(node.data.form.items, (cpn.obj || {}).params, drawn);
    graph.nodes.push(node);
  }
  const edges = new Set(graph.edges.map(e => `${e.source}->${e.target}`));
  for (const [id, cpn] of Object.entries(components)) {
    for (const r of routesOf(cpn, graph.nodes.find(n => n.id === id))) {
      for (const next of r.targets) {
        if (!components[next] || next === id || edges.has(`${id}->${next}`)) continue;
        graph.edges.push(routeEdge(id, r.handle, next));
        edges.add(`${id}->${next}`);
      }
    }
    for (const next of (cpn && cpn.downstream) || []) {
      if (components[next] && !edges.has(`${id}->${next}`)) graph.edges.push({ id: edgeId(id, next), source: id, sourceHandle: 'start', target: next, targetHandle: 'end', data: { isHovered: false } });
    }
  }
  return out;
}

/** A new Categorize's categories ordered as their targets were laid out (top to bottom): its handles then
 * follow its edges' ends and no two of its branch edges cross. A category without a target goes last. */
function inTargetOrder(items, params, drawn) {
  const cats = (params && params.category_description) || {};
  const top = item => {
    const ys = list(cats[item.name] && cats[item.name].to).map(t => drawn.get(t)).filter(i => i && i.position).map(i => i.position.y);
    return ys.length ? Math.min(...ys) : Infinity;
  };
  return items.map((item, i) => [top(item), i, item]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map(([, , item]) => item);
}

const routeEdge = (source, handle, target) => ({ id: edgeId(source, target, handle), source, sourceHandle: handle, target, targetHandle: 'end', data: { isHovered: false } });

/** After a router's params changed (`before`: its routes until then), what RAGFlow derives from them: the
 * Categorize's `items` (the handles), one graph edge per branch and target leaving from the branch's
 * handle (edges that stay are kept as they were), `downstream` (what no branch names any more goes, what a
 * branch names comes) and the targets' `upstream`. Mutates `out`. */
function syncRoutes(out, id, before) {
  const components = componentsOf(out);
  const cpn = components[id];
  const graph = graphOf(out);
  const node = graph.nodes.find(n => n.id === id);
  if (typeOf(cpn) === 'Categorize' && node) {
    const form = (node.data && node.data.form) || {};
    node.data = { ...(node.data || {}), form: { ...form, items: categoryItems((cpn.obj || {}).params, form.items) } };
  }
  const routes = routesOf(cpn, node);
  const wanted = new Map();            // "handle\ntarget" -> [handle, target]
  for (const r of routes) for (const t of r.targets) if (components[t] && t !== id) wanted.set(`${r.handle}\n${t}`, [r.handle, t]);
  const routed = new Set([...wanted.values()].map(([, t]) => t));
  const wasRouted = new Set(before.flatMap(r => r.targets));
  const down = [...new Set([...(cpn.downstream || []).filter(d => routed.has(d) || !wasRouted.has(d)), ...routed])];
  const gone = (cpn.downstream || []).filter(d => !down.includes(d));
  cpn.downstream = down;
  for (const t of gone) if (components[t]) components[t].upstream = (components[t].upstream || []).filter(u => u !== id);
  for (const t of down) if (components[t] && !(components[t].upstream || []).includes(id)) components[t].upstream = [...(components[t].upstream || []), id];
  const plain = h => h === undefined || h === null || h === 'start';
  const have = new Set();
  graph.edges = graph.edges.filter(e => {
    if (e.source !== id) return true;
    if (plain(e.sourceHandle)) return down.includes(e.target);
    const key = `${e.sourceHandle}\n${e.target}`;
    if (!wanted.has(key) || have.has(key)) return false;
    have.add(key);
    return true;
  });
  for (const [key, [handle, target]] of wanted) if (!have.has(key)) graph.edges.push(routeEdge(id, handle, target));
}

/** A router's params with the targets of one branch (a route of routesOf) replaced. */
function withTargets(params, type, route, targets) {
  const out = clone(params || {});
  if (type === 'Categorize') {
    const cats = out.category_description || {};
    out.category_description = { ...cats, [route.key]: { ...(cats[route.key] || {}), to: targets } };
  } else if (route.key === 'else') {
    out.end_cpn_ids = targets;
  } else {
    const conditions = Array.isArray(out.conditions) ? out.conditions : [];
    out.conditions = conditions.map((c, i) => (i === route.key ? { ...(c || {}), to: targets } : c));
  }
  return out;
}

/** Route a branch of a router (the handle of a Categorize's category, a Switch's case or else) to
 * `target`, as RAGFlow's canvas does when an edge is drawn from that handle: the target joins the
 * branch's `to` (`end_cpn_ids` for the else), `downstream`, and the graph gets the edge from the handle. */
export function routeTo(dsl, source, handle, target) {
  const components = componentsOf(dsl);
  if (!components[source] || !components[target] || source === target) return dsl;
  const node = ((dsl.graph && dsl.graph.nodes) || []).find(n => n.id === source);
  const route = routesOf(components[source], node).find(r => r.handle === handle);
  if (!route) return connect(dsl, source, target);
  if (route.targets.includes(target)) return dsl;
  return setParams(dsl, source, withTargets((components[source].obj || {}).params, typeOf(components[source]), route, [...route.targets, target]));
}

/** Take `target` out of one branch of a router (its edge from that handle deleted). */
export function unroute(dsl, source, handle, target) {
  const components = componentsOf(dsl);
  const node = ((dsl.graph && dsl.graph.nodes) || []).find(n => n.id === source);
  const route = components[source] && routesOf(components[source], node).find(r => r.handle === handle);
  if (!route) return disconnect(dsl, source, target);
  return setParams(dsl, source, withTargets((components[source].obj || {}).params, typeOf(components[source]), route, route.targets.filter(t => t !== target)));
}

/** A router's params with `targets` taken out of every branch (what RAGFlow does when they are deleted). */
function withoutTargets(dsl, id, targets) {
  const cpn = componentsOf(dsl)[id];
  const node = ((dsl.graph && dsl.graph.nodes) || []).find(n => n.id === id);
  let params = (cpn.obj || {}).params || {};
  for (const route of routesOf(cpn, node)) {
    if (route.targets.some(t => targets.has(t))) params = withTargets(params, typeOf(cpn), route, route.targets.filter(t => !targets.has(t)));
  }
  return params;
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

/** RAGFlow's name for a new box of `type`: its friendly name and the first free index ("Agent_0",
 * "Agent_1"...), counted over the names of the graph's nodes as RAGFlow counts them (after the highest
 * index of an unbroken run from the lowest). */
export function newName(dsl, type) {
  const base = friendlyName(type);
  const taken = ((dsl.graph && dsl.graph.nodes) || []).map(n => n && n.data && n.data.name).filter(n => typeof n === 'string')
    .filter(n => (n.match(/_/g) || []).length === 1 && n.split('_')[0] === base && /^\d+$/.test(n.split('_')[1]))
    .map(n => Number(n.split('_')[1])).sort((a, b) => a - b);
  if (!taken.length) return `${base}_0`;
  const gap = taken.findIndex((n, i) => taken[i + 1] !== n + 1);
  return `${base}_${taken[gap] + 1}`;
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

/** The free spot for a box nearest to `position` (searched on a 20-pixel grid up to 600 pixels away),
 * clear by 12 pixels of the `rects` ({x, y, w, h}), and right of `minX` where one is (a box between two
 * others reads left to right); `position` itself when nothing is free. */
export function nearestFreeSpot(position, rects, minX = -Infinity) {
  const gap = 12;
  const free = p => !rects.some(r => p.x < r.x + r.w + gap && r.x < p.x + SIZE.width + gap && p.y < r.y + r.h + gap && r.y < p.y + SIZE.height + gap);
  const steps = [];
  for (let i = -30; i <= 30; i++) for (let j = -30; j <= 30; j++) steps.push([i * 20, j * 20]);
  const cost = ([dx, dy]) => Math.hypot(dx, dy) + (position.x + dx < minX ? 10000 : 0);
  steps.sort((a, b) => cost(a) - cost(b));
  for (const [dx, dy] of steps) {
    const p = { x: position.x + dx, y: position.y + dy };
    if (free(p)) return p;
  }
  return position;
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
  const name = newName(out, type);
  graphOf(out).nodes.push(graphNode(id, type, params, freeSpot(out, position, parentId, rects), parentId, name));
  if (START_OF[type]) {
    const start = newId(out, START_OF[type]);
    out.components[start] = { obj: { component_name: START_OF[type], params: {} }, downstream: [], upstream: [], parent_id: id };
    out.graph.nodes.push(graphNode(start, START_OF[type], {}, { x: 30, y: 50 }, id));
  }
  return [out, id];
}

/** Put a new component of `type` on the link an edge draws (`edge`: {source, target, handle}): the edge's
 * source then leads to the new box, and the new box to the edge's target. A router's branch keeps its
 * place: the new box takes the target's place in that branch's `to`. The box goes to the free spot
 * nearest `position` when `rects` (the boxes there) are given. Returns [dsl, id]. */
export function insertOnEdge(dsl, edge, type, params, position, rects = null) {
  const components = componentsOf(dsl);
  const { source, target, handle } = edge;
  if (!components[source] || !components[target]) return addComponent(dsl, type, params, position, undefined, rects);
  const parentId = components[target].parent_id && components[target].parent_id === components[source].parent_id ? components[target].parent_id : undefined;
  const from = ((dsl.graph && dsl.graph.nodes) || []).find(n => n.id === source);
  const minX = from && from.position ? from.position.x + SIZE.width + 20 : -Infinity;
  let [next, id] = addComponent(dsl, type, params, rects ? nearestFreeSpot(position, rects, minX) : position, parentId, []);
  const node = graphOf(next).nodes.find(n => n.id === source);
  const route = handle ? routesOf(componentsOf(next)[source], node).find(r => r.handle === handle) : null;
  if (route) {
    const router = componentsOf(next)[source];
    next = setParams(next, source, withTargets((router.obj || {}).params, typeOf(router), route, route.targets.map(t => (t === target ? id : t))));
  } else {
    next = connect(disconnect(next, source, target), source, id);
  }
  return [connect(next, id, target), id];
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
  let result = out;
  for (const [id, cpn] of Object.entries(components)) {
    if (routesOf(cpn, null).some(r => r.targets.some(t => gone.has(t)))) result = setParams(result, id, withoutTargets(result, id, gone));
  }
  return result;
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
  const cpn = componentsOf(dsl)[source];
  if (cpn && routesOf(cpn, null).some(r => r.targets.includes(target))) dsl = setParams(dsl, source, withoutTargets(dsl, source, new Set([target])));
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
  const node = graphOf(out).nodes.find(n => n.id === id);
  const before = routesOf(cpn, node);
  cpn.obj = { ...(cpn.obj || {}), params: clone(params) };
  if (node) node.data = { ...(node.data || {}), form: { ...((node.data && node.data.form) || {}), ...clone(params) } };
  if (before.length || routesOf(cpn, node).length) syncRoutes(out, id, before);
  return out;
}

/** Rename a box: its graph node's `data.name`, what the canvas, the picker and RAGFlow's canvas show (the
 * component's id, which references use, stays). An empty name shows the id again. */
export function renameNode(dsl, id, name) {
  const out = clone(dsl);
  const node = graphOf(out).nodes.find(n => n.id === id);
  if (!node) return dsl;
  const data = { ...(node.data || {}) };
  if (name.trim()) data.name = name; else delete data.name;
  node.data = data;
  return out;
}
