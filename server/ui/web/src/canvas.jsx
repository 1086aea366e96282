// The agent on a React Flow canvas, for watching a run: zoom, pan, fit and full screen; each component's
// state as a fill (waiting, running with its elapsed time, done, error, paused, cancelled, skipped
// dimmed); the edges a turn took highlighted; an Agent's tools and sub-agents drawn below it. The same
// states are listed under the canvas as text (screen readers, narrow windows, and keyboard: each name
// opens the component's step).
import { memo, useCallback, useEffect, useMemo, useState } from 'react';
import { ReactFlow, ReactFlowProvider, Background, Controls, Handle, MiniMap, Position, useUpdateNodeInternals } from '@xyflow/react';
import { layout, isContainer } from './graphmodel.js';
import { ReadableView } from './readableview.jsx';
import './runcanvas.css';
import { seconds } from './util.js';

export const STATES = ['waiting', 'running', 'done', 'error', 'paused', 'cancelled', 'skipped'];

function Elapsed({ since }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 200);
    return () => clearInterval(timer);
  }, []);
  return <span className="elapsed-live">{((now - since) / 1000).toFixed(1)} s</span>;
}

/** One box: its type, its name, its state and what the state says (elapsed, error, diagnostics). */
export const ComponentNode = memo(function ComponentNode({ id, data }) {
  const state = data.state || 'waiting';
  const problems = data.problems || [];
  const severity = problems.some(p => p.severity === 'error') ? 'error' : problems.length ? 'warning' : '';
  const title = [`${id} (${data.type})`, state !== 'waiting' ? state : '', data.detail || '',
    ...problems.map(p => `${p.severity}: ${p.field ? p.field + ': ' : ''}${p.message}`)].filter(Boolean).join('\n');
  return (
    <div className={`c2g-node kind-${data.kind} state-${state}${severity ? ` has-${severity}` : ''}${data.container ? ' container' : ''}${data.routes && data.routes.length ? ' has-routes' : ''}`}
      data-component={id} data-state={state} title={title}>
      {data.kind !== 'note' ? <Handle type="target" position={data.kind !== 'component' || data.direction === 'TB' ? Position.Top : Position.Left} /> : null}
      <div className="node-type">{data.type}{severity ? <span className={`badge ${severity}`} aria-label={`${problems.length} problem${problems.length > 1 ? 's' : ''}`}>{problems.length}</span> : null}</div>
      <div className="node-name">{data.label}</div>
      {data.kind === 'note' ? <div className="node-note">{data.text}</div> : null}
      <div className="node-detail">
        {state === 'running' && data.startedAt ? <Elapsed since={data.startedAt} /> : (data.detail || '')}
      </div>
      {data.routes && data.routes.length ? (
        <ul className={`node-routes dir-${data.direction}`} aria-label={`Branches of ${id}`}>
          {data.routes.map(r => (
            <li key={r.handle} className="node-route" data-handle={r.handle} title={r.label}>
              <span className="route-label">{r.label}</span>
              <Handle type="source" id={r.handle} position={data.direction === 'TB' ? Position.Bottom : Position.Right} isConnectableEnd={false}
                aria-label={`Branch ${r.label} of ${id}`} />
            </li>
          ))}
        </ul>
      ) : data.kind === 'component' || data.kind === 'agent' ? <Handle type="source" position={data.direction === 'TB' ? Position.Bottom : Position.Right} /> : null}
    </div>
  );
});

export const nodeTypes = { component: ComponentNode };

/** React Flow nodes from the laid-out items, with each one's state. */
export function flowNodes(items, states = {}, problems = {}, direction = 'LR') {
  // parents first: React Flow wants a group before its children
  const ordered = [...items].sort((a, b) => (a.parentId ? 1 : 0) - (b.parentId ? 1 : 0));
  return ordered.map(item => {
    const s = states[item.id] || {};
    const container = isContainer(item.type);
    return {
      id: item.id, type: 'component', position: item.position || { x: 0, y: 0 },
      ...(item.parentId ? { parentId: item.parentId, extent: 'parent' } : {}),
      ...(container ? { style: { width: item.width, height: item.height } } : {}),
      width: item.width, height: item.height,
      className: container ? 'group-node' : undefined,
      data: { kind: item.kind, type: item.type, label: item.label, text: item.text, container, direction, routes: item.routes,
        state: item.kind === 'note' ? 'waiting' : (s.state || 'waiting'), detail: s.detail || '', startedAt: s.startedAt,
        problems: problems[item.id] || [] },
    };
  });
}

const LIT = new Set(['running', 'done', 'error', 'paused', 'cancelled']);

/** React Flow edges; an edge is taken when its source is done and its target started. */
export function flowEdges(edges, states = {}) {
  return edges.map(e => {
    const from = (states[e.source] || {}).state;
    const to = (states[e.target] || {}).state;
    const branch = (states[e.source] || {}).branch;          // the category a Categorize picked, when known
    const taken = e.kind === 'flow' && from === 'done' && LIT.has(to) && (!e.route || typeof branch !== 'string' || branch.trim() === e.route);
    const skipped = to === 'skipped' || from === 'skipped';
    return { id: e.id, source: e.source, target: e.target, animated: taken && to === 'running',
      ...(e.sourceHandle ? { sourceHandle: e.sourceHandle, data: { route: e.route, handle: e.sourceHandle } } : {}),
      className: `edge-${e.kind}${taken ? ' taken' : ''}${skipped ? ' skipped' : ''}`,
      style: e.kind === 'flow' ? undefined : { strokeDasharray: '5 4' } };
  });
}

/** React Flow's nodes with the sizes it measured kept on them (`measured`), and the change handler that
 * records them. React Flow keeps a node's measured handles only while the node it is given carries
 * `measured`: a node passed anew without it (every state change or edit makes new node objects) loses them,
 * and every edge touching it is hidden until the browser has measured the box again, which on a busy
 * machine came seconds later, again at each event of a turn. */
export function useMeasured(nodes) {
  const [sizes, setSizes] = useState({});
  const onMeasure = useCallback(changes => {
    const dims = changes.filter(c => c.type === 'dimensions' && c.dimensions);
    if (!dims.length) return;
    setSizes(old => {
      const changed = dims.filter(c => !old[c.id] || old[c.id].width !== c.dimensions.width || old[c.id].height !== c.dimensions.height);
      return changed.length ? { ...old, ...Object.fromEntries(changed.map(c => [c.id, { width: c.dimensions.width, height: c.dimensions.height }])) } : old;
    });
  }, []);
  const shown = useMemo(() => nodes.map(n => (sizes[n.id] ? { ...n, measured: sizes[n.id] } : n)), [nodes, sizes]);
  return [shown, onMeasure];
}

/** Every box's handles measured again once the boxes are drawn (and when boxes come or go). React Flow
 * measures a node's handles when it first sizes it; node objects passed anew around that moment (the sizes
 * useMeasured keeps, a state change) could leave a node sized but without handle bounds, and every edge
 * touching it then stayed hidden: 1 open in 8 of the 21-box support desk drew no edge at all. Rendered
 * inside a <ReactFlow>. */
export function RemeasureHandles({ ids }) {
  const update = useUpdateNodeInternals();
  const key = ids.join('\n');
  useEffect(() => {
    const all = key ? key.split('\n') : [];
    if (!all.length) return undefined;
    const frame = requestAnimationFrame(() => update(all));
    const timer = setTimeout(() => update(all), 300);
    return () => { cancelAnimationFrame(frame); clearTimeout(timer); };
  }, [key, update]);
  return null;
}

/** Fit the components (notes left out: RAGFlow's sit far around the graph) at a zoom that keeps labels readable. */
export const FIT = { padding: 0.12, maxZoom: 1 };
export function fitOptions(items) {
  return { ...FIT, nodes: items.filter(i => i.kind !== 'note').map(i => ({ id: i.id })) };
}

// the minimap's fill per state (style.css's state colours)
const MINIMAP_FILL = { waiting: '#ffffff', running: '#1f6feb', done: '#2da44e', error: '#cf222e', paused: '#bf8700',
  cancelled: '#6e7781', skipped: '#e6e8eb' };

/** The run view's canvas. `states`: {id: {state, detail, startedAt}}; `onOpen(id)` opens a component's
 * step; `selected`: the id whose step is open (its box is outlined); `children` sit over the canvas (the
 * step drawer). It opens at a zoom its text reads at (readableview.jsx), with a minimap. */
export function RunCanvas({ dsl, states, onOpen, selected = null, title = 'Graph', children = null }) {
  const drawn = useMemo(() => layout(dsl), [dsl]);
  const [nodes, onMeasure] = useMeasured(useMemo(() => flowNodes(drawn.items, states, {}, drawn.direction)
    .map(n => (n.id === selected ? { ...n, selected: true } : n)), [drawn, states, selected]));
  const edges = useMemo(() => flowEdges(drawn.edges, states), [drawn, states]);
  const [full, setFull] = useState(false);
  const components = drawn.items.filter(i => i.kind === 'component');
  const ids = useMemo(() => drawn.items.filter(i => i.kind !== 'note').map(i => i.id), [drawn]);
  const running = Object.keys(states).find(id => states[id].state === 'running') || null;
  const start = (components.find(c => c.type === 'Begin') || components[0] || {}).id;

  useEffect(() => {
    if (!full) return undefined;
    const leave = event => { if (event.key === 'Escape') setFull(false); };
    document.addEventListener('keydown', leave);
    return () => document.removeEventListener('keydown', leave);
  }, [full]);

  return (
    <section className={`card graph${full ? ' full-screen' : ''}`} aria-labelledby="graph-title">
      <div className="graph-head">
        <h2 id="graph-title">{title}</h2>
        <button type="button" onClick={() => setFull(!full)} aria-pressed={full}>{full ? 'Leave full screen' : 'Full screen'}</button>
      </div>
      <ul className="legend" aria-label="Legend">
        {STATES.map(s => <li key={s} className={`state-${s}`}><span className="swatch" aria-hidden="true" />{s}</li>)}
      </ul>
      <div className="canvas-area">
        <div className="canvas" role="img" aria-label="The agent graph; component states are listed below it">
          <ReactFlowProvider>
            <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} minZoom={0.1} maxZoom={2.5}
              nodesDraggable={false} nodesConnectable={false} elementsSelectable={false} proOptions={{ hideAttribution: true }} onNodesChange={onMeasure}
              onNodeClick={(_, node) => node.data.kind === 'component' && onOpen && onOpen(node.id)}>
              <Background gap={20} size={1} />
              <Controls showInteractive={false} fitViewOptions={fitOptions(drawn.items)} />
              <RemeasureHandles ids={nodes.map(n => n.id)} />
              <MiniMap pannable zoomable ariaLabel="Overview of the graph" nodeStrokeWidth={3} style={{ width: 160, height: 110 }}
                nodeColor={n => MINIMAP_FILL[(n.data && n.data.state) || 'waiting'] || MINIMAP_FILL.waiting} nodeStrokeColor="#8a94a3" />
              <ReadableView ids={ids} focus={() => running || start} running={running} selected={children ? selected : null}
                signature={`${full}:${drawn.items.length}`} />
            </ReactFlow>
          </ReactFlowProvider>
        </div>
        {children}
      </div>
      <details className="state-list" open>
        <summary>Components</summary>
        <ol className="states" aria-label="Component states">
          {components.map(c => {
            const s = states[c.id] || {};
            const state = s.state || 'waiting';
            return (
              <li key={c.id} className={`state-${state}`} data-component={c.id} data-state={state}>
                <span className="swatch" aria-hidden="true" />
                {onOpen ? <button type="button" className="link" onClick={() => onOpen(c.id)} aria-label={`Open the step of ${c.id}`}><code>{c.id}</code></button> : <code>{c.id}</code>}
                {' '}<span className="muted">{c.type}</span> · <span className="state-text">{state}</span>
                <span className="state-detail">{s.detail ? ` (${s.detail})` : ''}</span>
              </li>
            );
          })}
        </ol>
      </details>
    </section>
  );
}

export { seconds };
