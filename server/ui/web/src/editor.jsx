// The canvas editor: move, add and delete components and edges (Iteration and Loop bodies are groups),
// add from a searchable palette (a click, or a drag onto the canvas or onto an edge), edit the selected
// component's params in a form generated from its params model, see the check's diagnostics live on the
// boxes and fields they name, undo and redo, and save (a new version of the agent, or a new agent, which
// then opens). Unsaved changes are marked and leaving asks first; saved versions are listed, compared and
// restored beside the canvas. Positions live in the DSL's `graph`, as RAGFlow keeps them: an agent
// without them is laid out once, left to right, and its boxes then stay where they are.
import { useEffect, useMemo, useRef, useState } from 'react';
import { ReactFlow, ReactFlowProvider, Background, Controls, MiniMap, applyNodeChanges, useReactFlow, useUpdateNodeInternals } from '@xyflow/react';
import { api } from './api.js';
import { FIT, RemeasureHandles, flowEdges, flowNodes, nodeTypes, useMeasured } from './canvas.jsx';
import { DiagnosticsTable, Loading, PageError, notify, useLoad } from './common.jsx';
import { addComponent, connect, deleteComponents, disconnect, emptyDsl, insertOnEdge, materialize, moveNodes, renameNode, routeTo, setParams, unroute } from './editmodel.js';
import { isContainer, layout, routesOf } from './graphmodel.js';
import { useLeaveGuard } from './leaveguard.js';
import { ComponentPalette, DRAG_TYPE } from './palette.jsx';
import { ParamsForm } from './paramsform.jsx';
import { edgeTypes } from './routededge.jsx';
import { componentsOf, plainError, route, typeOf } from './util.js';
import { VersionsPanel } from './versions.jsx';
import './editor.css';

const enc = encodeURIComponent;
const ADDABLE = new Set(['component', 'container', 'exit', 'tool']);

export function EditorPage({ agentId, onAuthLost }) {
  const page = useLoad(async () => {
    const [agent, schemas] = await Promise.all([agentId ? api('GET', `/agents/${enc(agentId)}`) : null, api('GET', '/components')]);
    return { agent, schemas };
  }, [agentId], onAuthLost);
  if (page.error) return <PageError error={page.error} />;
  if (!page.data) return <Loading />;
  return <ReactFlowProvider><Editor agent={page.data.agent} schemas={page.data.schemas} /></ReactFlowProvider>;
}

/** The DSL with undo and redo: `change(next, mergeKey)` records a step (steps with the same key in a row,
 * such as typing in one field, are one step). */
function useHistory(initial) {
  const [state, setState] = useState({ past: [], present: initial, future: [], key: null, at: 0 });
  return {
    dsl: state.present,
    canUndo: state.past.length > 0,
    canRedo: state.future.length > 0,
    change(next, key = null) {
      setState(s => {
        if (next === s.present) return s;
        const merge = key && key === s.key && Date.now() - s.at < 1500;
        return { past: merge ? s.past : [...s.past, s.present].slice(-200), present: next, future: [], key, at: Date.now() };
      });
    },
    undo() { setState(s => (s.past.length ? { past: s.past.slice(0, -1), present: s.past.at(-1), future: [s.present, ...s.future], key: null, at: 0 } : s)); },
    redo() { setState(s => (s.future.length ? { past: [...s.past, s.present], present: s.future[0], future: s.future.slice(1), key: null, at: 0 } : s)); },
  };
}

function useDiagnostics(dsl) {
  const [verdict, setVerdict] = useState({ diagnostics: [], checking: true, ok: false });
  useEffect(() => {
    let live = true;
    setVerdict(v => ({ ...v, checking: true }));
    const timer = setTimeout(async () => {
      try {
        const reply = await api('POST', '/graphs/compile', { dsl });
        if (live) setVerdict({ diagnostics: reply.diagnostics || [], ok: reply.ok, checking: false });
      } catch (e) {
        if (live) setVerdict({ diagnostics: (e.data && e.data.diagnostics) || [{ severity: 'error', message: plainError(e.message) }], ok: false, checking: false });
      }
    }, 350);
    return () => { live = false; clearTimeout(timer); };
  }, [dsl]);
  return verdict;
}

/** The diagnostics by the component they name. */
function problemsByComponent(diagnostics) {
  const out = {};
  for (const d of diagnostics) if (d.component_id) (out[d.component_id] = out[d.component_id] || []).push(d);
  return out;
}

/** Ctrl+Z undoes, Ctrl+Shift+Z and Ctrl+Y redo (not while typing in a field, which has its own undo). */
function useUndoKeys(history) {
  useEffect(() => {
    const keys = event => {
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName);
      if (typing || !(event.ctrlKey || event.metaKey)) return;
      if (event.key.toLowerCase() === 'z' && !event.shiftKey) { event.preventDefault(); history.undo(); }
      else if ((event.key.toLowerCase() === 'z' && event.shiftKey) || event.key.toLowerCase() === 'y') { event.preventDefault(); history.redo(); }
    };
    document.addEventListener('keydown', keys);
    return () => document.removeEventListener('keydown', keys);
  });
}

/** Where a new component goes: inside the selected Iteration or Loop, else right of the selected box, else
 * in the middle of the view. Returns {parent, position}. */
function placeFor(flow, dsl, selected) {
  const components = componentsOf(dsl);
  const parent = selected && isContainer(typeOf(components[selected])) ? selected : undefined;
  if (parent) return { parent, position: { x: 40, y: 60 } };
  const box = document.querySelector('.editor-canvas');
  const rect = box ? box.getBoundingClientRect() : { left: 0, top: 0, width: 600, height: 400 };
  let position = flow.screenToFlowPosition({ x: rect.left + rect.width / 2 - 100, y: rect.top + rect.height / 2 - 30 });
  const near = selected && (dsl.graph.nodes.find(n => n.id === selected) || {}).position;
  if (near && components[selected] && !components[selected].parent_id) position = { x: near.x + 260, y: near.y };
  return { parent, position };
}

/** The DSL with a new `kind` component where placeFor says, clear of the boxes there: [dsl, id, parent]. */
function addHere(flow, dsl, drawn, kind, spec, selected) {
  const { parent, position } = placeFor(flow, dsl, selected);
  const rects = drawn.items.filter(i => (i.parentId || undefined) === parent && i.position)
    .map(i => ({ x: i.position.x, y: i.position.y, w: i.width || 200, h: i.height || 60 }));
  const [next, id] = addComponent(dsl, kind, spec ? defaultsOf(spec.schema) : {}, position, parent, rects);
  return [next, id, parent];
}

/** Save: a new version of `agent`, or a new agent (which then opens; `beforeOpen()` first). */
async function saveAgent(agent, title, dsl, beforeOpen) {
  if (agent) {
    await api('PUT', `/agents/${enc(agent.id)}`, { dsl, ...(title.trim() && title !== agent.title ? { title: title.trim() } : {}) });
    notify(`Saved a new version of ${title || agent.title}.`);
    return;
  }
  const created = await api('POST', '/agents', { title: title.trim(), dsl });
  notify(`Saved ${created.title}.`);
  beforeOpen();
  location.hash = route('agents', created.id);
}

/** The edge drawn under a screen point (within a few pixels of its line), as {id, source, target, handle}. */
function edgeAt(x, y, edges) {
  let best = null;
  for (const path of document.querySelectorAll('.editor-canvas .react-flow__edge path.react-flow__edge-path')) {
    const id = path.closest('.react-flow__edge') && path.closest('.react-flow__edge').dataset.id;
    const m = path.getScreenCTM();
    const length = path.getTotalLength();
    if (!id || !m || !length) continue;
    for (let i = 0; i <= 40; i++) {
      const p = path.getPointAtLength((length * i) / 40);
      const d = Math.hypot(p.x * m.a + m.e - x, p.y * m.d + m.f - y);
      if (d < 12 && (!best || d < best.d)) best = { id, d };
    }
  }
  const edge = best && edges.find(e => e.id === best.id && e.className.includes('edge-flow'));
  return edge ? { id: edge.id, source: edge.source, target: edge.target, handle: edge.data && edge.data.handle } : null;
}

/** The Iteration or Loop a screen point is over, if any. */
function groupAt(x, y, components) {
  const el = document.elementsFromPoint(x, y).find(e => e.classList && e.classList.contains('react-flow__node') && e.classList.contains('group-node'));
  const id = el && el.dataset.id;
  return id && components[id] && isContainer(typeOf(components[id])) ? id : undefined;
}

/** React Flow measures a box's handles only when the box is resized. A route change can give a router's
 * handles new ids at the same size (a Categorize whose items had no uuid gets them, as RAGFlow's canvas
 * gives them), and every edge from the new ids was hidden until the agent was opened again: the boxes
 * whose handles changed are measured again once they are drawn. */
function useHandlesMeasured(items) {
  const update = useUpdateNodeInternals();
  const seen = useRef(new Map());
  useEffect(() => {
    const changed = [];
    for (const item of items) {
      const handles = (item.routes || []).map(r => r.handle).join('\n');
      if (seen.current.has(item.id) && seen.current.get(item.id) !== handles) changed.push(item.id);
      seen.current.set(item.id, handles);
    }
    if (changed.length) update(changed);
  }, [items, update]);
}

/** Escape closes the versions panel, else the Inspector (a component's params). */
function useEscape(close) {
  useEffect(() => {
    const keys = event => { if (event.key === 'Escape' && !event.defaultPrevented) close(event); };
    document.addEventListener('keydown', keys);
    return () => document.removeEventListener('keydown', keys);
  });
}

function Editor({ agent, schemas }) {
  const start = useMemo(() => materialize(agent ? agent.dsl : emptyDsl()), [agent]);
  const history = useHistory(start);
  const { dsl } = history;
  const verdict = useDiagnostics(dsl);
  const flow = useReactFlow();
  const [selected, setSelected] = useState(null);
  const [title, setTitle] = useState(agent ? agent.title : '');
  const [kind, setKind] = useState('LLM');
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState({ dsl: start, title: agent ? agent.title : '', at: 0 });
  const dirty = dsl !== saved.dsl || title !== saved.title;
  const guard = useLeaveGuard(dirty);
  const [showVersions, setShowVersions] = useState(false);
  const [dropEdge, setDropEdge] = useState(null);
  const bySpec = useMemo(() => Object.fromEntries(schemas.map(s => [s.component_name, s])), [schemas]);
  const addable = schemas.filter(s => ADDABLE.has(s.kind) && s.component_name !== 'Begin');
  const components = componentsOf(dsl);

  const problems = useMemo(() => problemsByComponent(verdict.diagnostics), [verdict]);
  const drawn = useMemo(() => layout(dsl), [dsl]);
  const [pickedEdges, setPickedEdges] = useState(() => new Set());
  const { nodes, edges } = useEditorGraph(dsl, drawn, problems, selected, pickedEdges, dropEdge);
  useHandlesMeasured(drawn.items);

  useEffect(() => { document.title = `${dirty ? '• ' : ''}Edit · ${agent ? agent.title : 'new agent'} · canvas2graph`; }, [agent, dirty]);
  useUndoKeys(history);
  useEscape(() => {
    if (showVersions) setShowVersions(false);
    else if (selected) {
      setSelected(null);
      const canvas = document.querySelector('.editor-canvas .react-flow');
      if (canvas && document.activeElement && document.activeElement.closest('.inspector')) canvas.focus();
    }
  });
  const { shown, onNodesChange } = useMoves(nodes, dsl, history, setSelected);
  function add(type = kind) {
    const [next, id, parent] = addHere(flow, dsl, drawn, type, bySpec[type], selected);
    history.change(next);
    setSelected(id);
    setTimeout(() => { const zoom = flow.getZoom(); flow.fitView({ nodes: [{ id }], minZoom: zoom, maxZoom: zoom, duration: 150 }); }, 60);
    notify(`Added ${id}${parent ? ` inside ${parent}` : ''}.`);
  }
  // a component dragged from the palette: where it is let go (its box's middle there), between the two
  // boxes of the edge it is let go on, or inside the Iteration or Loop it is let go in
  function dragOver(event) {
    if (!event.dataTransfer.types.includes(DRAG_TYPE)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = 'copy';
    const over = edgeAt(event.clientX, event.clientY, edges);
    if ((over && over.id) !== (dropEdge && dropEdge.id)) setDropEdge(over);
  }
  function drop(event) {
    const type = event.dataTransfer.getData(DRAG_TYPE);
    setDropEdge(null);
    if (!type || !bySpec[type]) return;
    event.preventDefault();
    const at = flow.screenToFlowPosition({ x: event.clientX, y: event.clientY });
    const position = { x: at.x - 100, y: at.y - 29 };
    const params = defaultsOf(bySpec[type].schema);
    const edge = edgeAt(event.clientX, event.clientY, edges);
    const relative = (parent, at) => {
      const group = parent && drawn.items.find(i => i.id === parent);
      return group && group.position ? { x: at.x - group.position.x, y: at.y - group.position.y } : at;
    };
    if (edge) {
      // between the two boxes (inside their group when both are in one), moved clear of the boxes there: a
      // box let go on a line would hide it
      const group = components[edge.source].parent_id === components[edge.target].parent_id ? components[edge.source].parent_id : undefined;
      const rects = drawn.items.filter(i => (i.parentId || undefined) === group && i.position)
        .map(i => ({ x: i.position.x, y: i.position.y, w: i.width || 200, h: i.height || 60 }));
      const [next, id] = insertOnEdge(dsl, edge, type, params, relative(group, position), rects);
      history.change(next);
      setSelected(id);
      notify(`Added ${id} between ${edge.source} and ${edge.target}.`);
      return;
    }
    const parent = groupAt(event.clientX, event.clientY, components);
    const [next, id] = addComponent(dsl, type, params, relative(parent, position), parent, []);
    history.change(next);
    setSelected(id);
    notify(`Added ${id}${parent ? ` inside ${parent}` : ''}.`);
  }
  function restore(version, label) {
    history.change(materialize(version));
    setSelected(null);
    notify(`Loaded ${label} into the editor: save it to keep it as a new version, or undo.`);
  }
  function remove(ids, edges = []) {
    const real = ids.filter(id => components[id] && id !== 'begin');
    // the edges of a deleted box go with it; others selected with it are dropped in the same step
    const alone = edges.filter(e => !ids.includes(e.source) && !ids.includes(e.target));
    if (!real.length) { if (alone.length) dropEdges(alone); return; }
    history.change(dropEdgesFrom(deleteComponents(dsl, real), alone));
    if (real.includes(selected)) setSelected(null);
    notify(`Deleted ${real.join(', ')}.`);
  }
  function addLink(from, to, handle = null) {
    const route = handle && routesFor(from).find(r => r.handle === handle);
    history.change(route ? routeTo(dsl, from, handle, to) : connect(dsl, from, to));
    notify(route ? `Routed ${route.label} of ${from} to ${to}.` : `Connected ${from} to ${to}.`);
  }
  function dropEdges(gone) {
    if (gone.length) history.change(dropEdgesFrom(dsl, gone));
  }
  const routesFor = id => routesOf(components[id], ((dsl.graph && dsl.graph.nodes) || []).find(n => n.id === id));

  async function save() {
    if (saving) return;
    if (!agent && !title.trim()) { document.getElementById('editor-title').focus(); return; }
    setSaving(true);
    try {
      await saveAgent(agent, title, dsl, guard.release);
      setSaved({ dsl, title, at: Date.now() });
    } catch (e) { notify(e.message, 'error'); } finally { setSaving(false); }
  }

  const cpn = selected && components[selected];
  const ids = Object.keys(components);
  return (
    <>
      <div className="page-title">
        <h1>{agent ? `Edit · ${agent.title}` : 'New agent'}</h1>
        {agent ? <a className="button" href={route('agents', agent.id)}>Run</a> : null}
        <a className="button" href="#/agents">All agents</a>
      </div>
      <EditorBar agent={agent} title={title} setTitle={setTitle} history={history} onSave={save} saving={saving} verdict={verdict}
        dirty={dirty} showVersions={showVersions} onVersions={() => setShowVersions(!showVersions)} />
      {agent && showVersions ? <VersionsPanel agentId={agent.id} dsl={dsl} onRestore={restore} onClose={() => setShowVersions(false)} savedAt={saved.at} /> : null}
      <div className="editor-layout">
        <section className="card editor-main" aria-label="Canvas">
          <Palette kinds={addable} kind={kind} setKind={setKind} onAdd={() => add()} direction={drawn.direction}
            hint={selected && isContainer(typeOf(components[selected])) ? `adds inside ${selected}` : null} />
          <div className="editor-workspace">
          <ComponentPalette types={addable.map(s => s.component_name)} onAdd={add} />
          <div className={`canvas editor-canvas${dropEdge ? ' dragging-over' : ''}`} onDragOver={dragOver} onDrop={drop}
            onDragLeave={event => { if (!event.currentTarget.contains(event.relatedTarget)) setDropEdge(null); }}>
            <ReactFlow nodes={shown} edges={edges} nodeTypes={nodeTypes} edgeTypes={edgeTypes} fitView fitViewOptions={FIT} minZoom={0.1} maxZoom={2.5}
              proOptions={{ hideAttribution: true }} deleteKeyCode={['Delete', 'Backspace']} onNodesChange={onNodesChange}
              onNodeClick={(_, n) => setSelected(n.id)} onPaneClick={() => setSelected(null)}
              onConnect={c => addLink(c.source, c.target, c.sourceHandle)}
              onDelete={gone => remove(gone.nodes.map(n => n.id), gone.edges)} onEdgesChange={changes => setPickedEdges(old => pickEdges(old, changes))}>
              <Background gap={20} size={1} />
              <Controls showInteractive={false} fitViewOptions={FIT} />
              <RemeasureHandles ids={shown.map(n => n.id)} />
              <MiniMap pannable zoomable ariaLabel="Overview of the whole agent" style={{ width: 150, height: 96 }} />
            </ReactFlow>
          </div>
          </div>
          <LinkForm ids={ids} routesFor={routesFor} onLink={addLink} />
          <DiagnosticsBox diagnostics={verdict.diagnostics} onPick={setSelected} />
        </section>
        <Inspector id={selected} cpn={cpn} spec={cpn && bySpec[typeOf(cpn)]} schemas={schemas} problems={problems} ids={ids} dsl={dsl}
          onSelect={setSelected} onRemove={remove} onDisconnect={d => history.change(disconnect(dsl, selected, d))}
          onParams={params => history.change(setParams(dsl, selected, params), `params:${selected}`)}
          onRename={name => history.change(renameNode(dsl, selected, name), `name:${selected}`)} />
      </div>
    </>
  );
}

/** React Flow's nodes and edges for the editor: every box selectable; tool boxes movable once the graph holds them. */
function useEditorGraph(dsl, drawn, problems, selected, pickedEdges, dropEdge) {
  const nodes = useMemo(() => flowNodes(drawn.items, {}, problems, drawn.direction).map(n => ({ ...n, selected: n.id === selected,
    draggable: (n.data.kind !== 'tool' && n.data.kind !== 'agent') || Boolean(dsl.graph && dsl.graph.nodes.some(g => g.id === n.id)) })),
  [drawn, problems, selected, dsl]);
  const dropId = dropEdge && dropEdge.id;
  const edges = useMemo(() => flowEdges(drawn.edges, {}).map(e => ({ ...e, type: 'routed', deletable: e.className.includes('edge-flow'), focusable: true,
    selected: pickedEdges.has(e.id), className: e.id === dropId ? `${e.className} drop-target` : e.className,
    ariaLabel: `Edge from ${e.source}${e.data && e.data.route ? ` (${e.data.route})` : ''} to ${e.target}` })), [drawn, pickedEdges, dropId]);
  return { nodes, edges };
}

/** The DSL without the links React Flow's edges `gone` drew (a router's edge: that branch's target). */
function dropEdgesFrom(dsl, gone) {
  return gone.reduce((next, e) => (e.data && e.data.handle ? unroute(next, e.source, e.data.handle, e.target)
    : disconnect(next, e.source, e.target)), dsl);
}

/** The selected edges after React Flow's changes (a click or Enter on a focused edge selects it; Delete then
 * removes what is selected). */
function pickEdges(old, changes) {
  const picks = changes.filter(c => c.type === 'select');
  if (!picks.length) return old;
  const next = new Set(old);
  for (const c of picks) (c.selected ? next.add(c.id) : next.delete(c.id));
  return next;
}

/** Moving boxes: React Flow's nodes follow a drag as it goes; the DSL takes the positions once it ends
 * (a drag, or arrow keys on a selected box), one undo step per move. Enter on a focused box selects it. */
function useMoves(drawnNodes, dsl, history, setSelected) {
  const [nodes, onMeasure] = useMeasured(drawnNodes);
  const [dragging, setDragging] = useState(null);
  function onNodesChange(changes) {
    onMeasure(changes);
    const picked = changes.find(c => c.type === 'select' && c.selected);
    if (picked) setSelected(picked.id);
    const moves = changes.filter(c => c.type === 'position');
    if (!moves.length) return;
    const next = applyNodeChanges(moves, dragging || nodes);
    if (moves.some(c => c.dragging)) { setDragging(next); return; }
    setDragging(null);
    const positions = Object.fromEntries(moves.filter(c => c.position).map(c => [c.id, c.position]));
    if (Object.keys(positions).length) history.change(moveNodes(dsl, positions));
  }
  return { shown: dragging || nodes, onNodesChange };
}

/** Every diagnostic of the check, open while there are errors; a component in it selects that box. */
function DiagnosticsBox({ diagnostics, onPick }) {
  const errors = diagnostics.filter(d => d.severity === 'error').length;
  return (
    <details className="diagnostics-box" open={errors > 0}>
      <summary>Diagnostics ({diagnostics.length})</summary>
      {diagnostics.length ? <DiagnosticsTable diagnostics={diagnostics} onPick={onPick} /> : <p className="ok">No problems.</p>}
    </details>
  );
}

function EditorBar({ agent, title, setTitle, history, onSave, saving, verdict, dirty, showVersions, onVersions }) {
  const errors = verdict.diagnostics.filter(d => d.severity === 'error').length;
  return (
    <div className="editor-bar card" role="toolbar" aria-label="Editor">
      <label htmlFor="editor-title" className="inline-label">Title</label>
      <input id="editor-title" type="text" value={title} onChange={e => setTitle(e.target.value)} required={!agent} />
      <button type="button" onClick={history.undo} disabled={!history.canUndo}>Undo</button>
      <button type="button" onClick={history.redo} disabled={!history.canRedo}>Redo</button>
      {/* aria-disabled, not disabled, while saving: a disabled button drops the keyboard focus to the page */}
      <button type="button" className="primary" onClick={onSave} aria-disabled={saving}>{agent ? 'Save as a new version' : 'Save agent'}</button>
      <span className={`dirty-marker ${dirty ? 'dirty' : 'clean'}`} role="status">{dirty ? '● Unsaved changes' : agent ? 'All changes saved' : 'Not saved yet'}</span>
      {agent ? <button type="button" onClick={onVersions} aria-expanded={showVersions}>Versions</button> : null}
      <span className={`check-state ${errors ? 'error' : 'ok'}`} role="status">
        {verdict.checking ? 'Checking…' : errors ? `${errors} error${errors > 1 ? 's' : ''}` : 'Compiles'}
      </span>
    </div>
  );
}

function Palette({ kinds, kind, setKind, onAdd, hint, direction }) {
  return (
    <form className="palette" onSubmit={e => { e.preventDefault(); onAdd(); }}>
      <label htmlFor="palette-kind" className="inline-label">Component</label>
      <select id="palette-kind" value={kind} onChange={e => setKind(e.target.value)}>
        {kinds.map(s => <option key={s.component_name} value={s.component_name}>{s.component_name}</option>)}
      </select>
      <button type="submit">Add component</button>
      <span className="muted hint">{hint || `Drag from a box's ${direction === 'TB' ? 'bottom' : 'right'} handle to another box to connect them; Delete removes the selection; Escape closes the side panel.`}</span>
    </form>
  );
}

/** "Connect A to B", the keyboard's way to draw an edge. */
function LinkForm({ ids, routesFor, onLink }) {
  const [link, setLink] = useState({ from: '', to: '', handle: '' });
  const routes = link.from ? routesFor(link.from) : [];
  const handle = routes.some(r => r.handle === link.handle) ? link.handle : (routes[0] || {}).handle;
  const submit = event => {
    event.preventDefault();
    if (link.from && link.to) onLink(link.from, link.to, handle || null);
  };
  return (
    <form className="link-form" onSubmit={submit} aria-label="Connect two components">
      <label htmlFor="link-from" className="inline-label">Connect</label>
      <select id="link-from" value={link.from} onChange={e => setLink({ ...link, from: e.target.value })}>
        <option value="">(from)</option>{ids.map(id => <option key={id} value={id}>{id}</option>)}
      </select>
      {routes.length ? (<>
        <label htmlFor="link-branch" className="inline-label">branch</label>
        <select id="link-branch" value={handle} onChange={e => setLink({ ...link, handle: e.target.value })}>
          {routes.map(r => <option key={r.handle} value={r.handle}>{r.label}</option>)}
        </select>
      </>) : null}
      <label htmlFor="link-to" className="inline-label">to</label>
      <select id="link-to" value={link.to} onChange={e => setLink({ ...link, to: e.target.value })}>
        <option value="">(to)</option>{ids.map(id => <option key={id} value={id}>{id}</option>)}
      </select>
      <button type="submit">Connect</button>
    </form>
  );
}

/** The selected component's params, its delete and disconnect buttons; with none selected, the list. */
/** A box's name (its graph node's `data.name`), or undefined. */
function nameOf(dsl, id) {
  const node = ((dsl.graph && dsl.graph.nodes) || []).find(n => n.id === id);
  return node && node.data ? node.data.name : undefined;
}

function Inspector({ id, cpn, spec, schemas, problems, ids, onSelect, onRemove, onDisconnect, onParams, onRename, dsl }) {
  return (
    <aside className="card inspector" aria-labelledby="inspector-title">
      <h2 id="inspector-title">{cpn ? id : 'Components'}</h2>
      {cpn ? (<>
        <p className="muted">{typeOf(cpn)}{cpn.parent_id ? ` · inside ${cpn.parent_id}` : ''}</p>
        <div className="inspector-name">
          <label htmlFor="inspector-name" className="inline-label">Name on the canvas</label>
          <input id="inspector-name" type="text" value={nameOf(dsl, id) || ''} placeholder={id} onChange={e => onRename(e.target.value)}
            aria-describedby="inspector-name-help" />
          <p id="inspector-name-help" className="muted help">What the box shows; references keep using <code>{id}</code>.</p>
        </div>
        <div className="buttons">
          {id !== 'begin' ? <button type="button" className="danger" onClick={() => onRemove([id])}>Delete {id}</button> : null}
          {(cpn.downstream || []).map(d => <button key={d} type="button" onClick={() => onDisconnect(d)}>Disconnect {d}</button>)}
          <button type="button" onClick={() => onSelect(null)}>Close</button>
        </div>
        <ParamsForm key={id} componentId={id} spec={spec} params={(cpn.obj || {}).params || {}} schemas={schemas}
          problems={problems[id] || []} onChange={onParams} dsl={dsl} />
      </>) : (
        <ul className="component-picker">
          {ids.map(c => (
            <li key={c}><button type="button" className="link" onClick={() => onSelect(c)}>{c}</button>
              {nameOf(dsl, c) && nameOf(dsl, c) !== c ? <span className="muted"> {nameOf(dsl, c)}</span> : null}
              {problems[c] ? <span className="error"> · {problems[c].length} problem{problems[c].length > 1 ? 's' : ''}</span> : null}</li>
          ))}
        </ul>
      )}
    </aside>
  );
}

/** What a new component starts with: the defaults its params schema declares, then its `x-initial` (what
 * RAGFlow's canvas gives a new one where the engine's default means "not set": an LLM's sampling values and
 * their switches, never the engine's 0s; nodes/llm.py). */
function defaultsOf(schema) {
  const out = {};
  const skip = new Set(['inputs', 'outputs', 'debug_inputs']);
  for (const [name, prop] of Object.entries((schema && schema.properties) || {})) {
    if (!skip.has(name) && prop && prop.default !== undefined) out[name] = prop.default;
  }
  const initial = schema && schema['x-initial'];
  return initial && typeof initial === 'object' ? { ...out, ...initial } : out;
}
