// The canvas editor: move, add and delete components and edges (Iteration and Loop bodies are groups),
// edit the selected component's params in a form generated from its params model, see the check's
// diagnostics live on the boxes and fields they name, undo and redo, and save (a new version of the
// agent, or a new agent, which then opens). Positions live in the DSL's `graph`, as RAGFlow keeps them.
import { useEffect, useMemo, useRef, useState } from 'react';
import { ReactFlow, ReactFlowProvider, Background, Controls, applyNodeChanges, useReactFlow } from '@xyflow/react';
import { api } from './api.js';
import { FIT, flowEdges, flowNodes, nodeTypes } from './canvas.jsx';
import { DiagnosticsTable, Loading, PageError, notify, useLoad } from './common.jsx';
import { addComponent, connect, deleteComponents, disconnect, emptyDsl, materialize, moveNodes, setParams } from './editmodel.js';
import { isContainer, layout } from './graphmodel.js';
import { ParamsForm } from './paramsform.jsx';
import { componentsOf, plainError, route, typeOf } from './util.js';

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

function Editor({ agent, schemas }) {
  const start = useMemo(() => materialize(agent ? agent.dsl : emptyDsl()), [agent]);
  const history = useHistory(start);
  const { dsl } = history;
  const verdict = useDiagnostics(dsl);
  const flow = useReactFlow();
  const [selected, setSelected] = useState(null);
  const [title, setTitle] = useState(agent ? agent.title : '');
  const [kind, setKind] = useState('LLM');
  const [link, setLink] = useState({ from: '', to: '' });
  const [saving, setSaving] = useState(false);
  const [dragging, setDragging] = useState(null);      // React Flow's nodes while a drag is under way
  const bySpec = useMemo(() => Object.fromEntries(schemas.map(s => [s.component_name, s])), [schemas]);
  const addable = schemas.filter(s => ADDABLE.has(s.kind) && s.component_name !== 'Begin');
  const components = componentsOf(dsl);

  const problems = useMemo(() => {
    const out = {};
    for (const d of verdict.diagnostics) if (d.component_id) (out[d.component_id] = out[d.component_id] || []).push(d);
    return out;
  }, [verdict]);
  const drawn = useMemo(() => layout(dsl), [dsl]);
  const nodes = useMemo(() => flowNodes(drawn.items, {}, problems, drawn.direction).map(n => ({ ...n, selected: n.id === selected,
    draggable: n.data.kind !== 'tool' && n.data.kind !== 'agent' || Boolean(dsl.graph && dsl.graph.nodes.some(g => g.id === n.id)) })), [drawn, problems, selected, dsl]);
  const edges = useMemo(() => flowEdges(drawn.edges, {}).map(e => ({ ...e, deletable: e.className.includes('edge-flow'), focusable: true,
    ariaLabel: `Edge from ${e.source} to ${e.target}` })), [drawn]);

  useEffect(() => { document.title = `Edit · ${agent ? agent.title : 'new agent'} · canvas2graph`; }, [agent]);
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

  function onNodesChange(changes) {
    // selection by keyboard (Enter on a focused box) as by click
    const picked = changes.find(c => c.type === 'select' && c.selected);
    if (picked) setSelected(picked.id);
    const moves = changes.filter(c => c.type === 'position');
    if (!moves.length) return;
    const current = dragging || nodes;
    const next = applyNodeChanges(moves, current);
    if (moves.some(c => c.dragging)) { setDragging(next); return; }
    setDragging(null);
    const positions = Object.fromEntries(moves.filter(c => c.position).map(c => [c.id, c.position]));
    if (Object.keys(positions).length) history.change(moveNodes(dsl, positions));
  }
  function add() {
    const spec = bySpec[kind];
    const parent = selected && isContainer(typeOf(components[selected])) ? selected : undefined;
    let position = { x: 40, y: 60 };
    if (!parent) {
      const box = document.querySelector('.editor-canvas');
      const rect = box ? box.getBoundingClientRect() : { left: 0, top: 0, width: 600, height: 400 };
      position = flow.screenToFlowPosition({ x: rect.left + rect.width / 2 - 100, y: rect.top + rect.height / 2 - 30 });
      const near = selected && (dsl.graph.nodes.find(n => n.id === selected) || {}).position;
      if (near && !components[selected].parent_id) position = { x: near.x + 260, y: near.y };
    }
    const defaults = spec ? defaultsOf(spec.schema) : {};
    const rects = drawn.items.filter(i => (i.parentId || undefined) === parent && i.position)
      .map(i => ({ x: i.position.x, y: i.position.y, w: i.width || 200, h: i.height || 60 }));
    const [next, id] = addComponent(dsl, kind, defaults, position, parent, rects);
    history.change(next);
    setSelected(id);
    // bring the new box into view at the zoom the user chose
    setTimeout(() => { const zoom = flow.getZoom(); flow.fitView({ nodes: [{ id }], minZoom: zoom, maxZoom: zoom, duration: 150 }); }, 60);
    notify(`Added ${id}${parent ? ` inside ${parent}` : ''}.`);
  }
  function remove(ids) {
    const real = ids.filter(id => components[id] && id !== 'begin');
    if (!real.length) return;
    history.change(deleteComponents(dsl, real));
    if (real.includes(selected)) setSelected(null);
    notify(`Deleted ${real.join(', ')}.`);
  }
  function addLink(event) {
    event.preventDefault();
    if (!link.from || !link.to) return;
    history.change(connect(dsl, link.from, link.to));
    notify(`Connected ${link.from} to ${link.to}.`);
  }

  async function save() {
    if (!agent && !title.trim()) { document.getElementById('editor-title').focus(); return; }
    setSaving(true);
    try {
      if (agent) {
        await api('PUT', `/agents/${enc(agent.id)}`, { dsl, ...(title.trim() && title !== agent.title ? { title: title.trim() } : {}) });
        notify(`Saved a new version of ${title || agent.title}.`);
      } else {
        const created = await api('POST', '/agents', { title: title.trim(), dsl });
        notify(`Saved ${created.title}.`);
        location.hash = route('agents', created.id);
      }
    } catch (e) {
      notify(e.message, 'error');
    } finally {
      setSaving(false);
    }
  }

  const errors = verdict.diagnostics.filter(d => d.severity === 'error').length;
  const cpn = selected && components[selected];
  const spec = cpn && bySpec[typeOf(cpn)];
  const ids = Object.keys(components);
  return (
    <>
      <div className="page-title">
        <h1>{agent ? `Edit · ${agent.title}` : 'New agent'}</h1>
        {agent ? <a className="button" href={route('agents', agent.id)}>Run</a> : null}
        <a className="button" href="#/agents">All agents</a>
      </div>
      <div className="editor-bar card" role="toolbar" aria-label="Editor">
        <label htmlFor="editor-title" className="inline-label">Title</label>
        <input id="editor-title" type="text" value={title} onChange={e => setTitle(e.target.value)} required={!agent} />
        <button type="button" onClick={history.undo} disabled={!history.canUndo}>Undo</button>
        <button type="button" onClick={history.redo} disabled={!history.canRedo}>Redo</button>
        <button type="button" className="primary" onClick={save} disabled={saving}>{agent ? 'Save as a new version' : 'Save agent'}</button>
        <span className={`check-state ${errors ? 'error' : 'ok'}`} role="status">
          {verdict.checking ? 'Checking…' : errors ? `${errors} error${errors > 1 ? 's' : ''}` : 'Compiles'}
        </span>
      </div>
      <div className="editor-layout">
        <section className="card editor-main" aria-label="Canvas">
          <form className="palette" onSubmit={e => { e.preventDefault(); add(); }}>
            <label htmlFor="palette-kind" className="inline-label">Component</label>
            <select id="palette-kind" value={kind} onChange={e => setKind(e.target.value)}>
              {addable.map(s => <option key={s.component_name} value={s.component_name}>{s.component_name}</option>)}
            </select>
            <button type="submit">Add component</button>
            <span className="muted hint">{selected && isContainer(typeOf(components[selected])) ? `adds inside ${selected}` : 'Drag from a box\'s right handle to another box to connect them; Delete removes the selection.'}</span>
          </form>
          <div className="canvas editor-canvas">
            <ReactFlow nodes={dragging || nodes} edges={edges} nodeTypes={nodeTypes} fitView fitViewOptions={FIT} minZoom={0.1} maxZoom={2.5}
              proOptions={{ hideAttribution: true }} deleteKeyCode={['Delete', 'Backspace']}
              onNodesChange={onNodesChange}
              onNodeClick={(_, node) => setSelected(node.id)} onPaneClick={() => setSelected(null)}
              onConnect={c => history.change(connect(dsl, c.source, c.target))}
              onNodesDelete={gone => remove(gone.map(n => n.id))}
              onEdgesDelete={gone => { let next = dsl; for (const e of gone) next = disconnect(next, e.source, e.target); history.change(next); }}>
              <Background gap={20} size={1} />
              <Controls showInteractive={false} fitViewOptions={FIT} />
            </ReactFlow>
          </div>
          <form className="link-form" onSubmit={addLink} aria-label="Connect two components">
            <label htmlFor="link-from" className="inline-label">Connect</label>
            <select id="link-from" value={link.from} onChange={e => setLink({ ...link, from: e.target.value })}>
              <option value="">(from)</option>{ids.map(id => <option key={id} value={id}>{id}</option>)}
            </select>
            <label htmlFor="link-to" className="inline-label">to</label>
            <select id="link-to" value={link.to} onChange={e => setLink({ ...link, to: e.target.value })}>
              <option value="">(to)</option>{ids.map(id => <option key={id} value={id}>{id}</option>)}
            </select>
            <button type="submit">Connect</button>
          </form>
          <details className="diagnostics-box" open={errors > 0}>
            <summary>Diagnostics ({verdict.diagnostics.length})</summary>
            {verdict.diagnostics.length ? <DiagnosticsTable diagnostics={verdict.diagnostics} onPick={setSelected} /> : <p className="ok">No problems.</p>}
          </details>
        </section>
        <aside className="card inspector" aria-labelledby="inspector-title">
          <h2 id="inspector-title">{cpn ? selected : 'Components'}</h2>
          {cpn ? (<>
            <p className="muted">{typeOf(cpn)}{cpn.parent_id ? ` · inside ${cpn.parent_id}` : ''}</p>
            <div className="buttons">
              {selected !== 'begin' ? <button type="button" className="danger" onClick={() => remove([selected])}>Delete {selected}</button> : null}
              {(cpn.downstream || []).map(d => <button key={d} type="button" onClick={() => history.change(disconnect(dsl, selected, d))}>Disconnect {d}</button>)}
              <button type="button" onClick={() => setSelected(null)}>Close</button>
            </div>
            <ParamsForm key={selected} componentId={selected} spec={spec} params={(cpn.obj || {}).params || {}} schemas={schemas}
              problems={problems[selected] || []} onChange={params => history.change(setParams(dsl, selected, params), `params:${selected}`)} />
          </>) : (
            <ul className="component-picker">
              {ids.map(id => (
                <li key={id}><button type="button" className="link" onClick={() => setSelected(id)}>{id}</button>
                  {problems[id] ? <span className="error"> · {problems[id].length} problem{problems[id].length > 1 ? 's' : ''}</span> : null}</li>
              ))}
            </ul>
          )}
        </aside>
      </div>
    </>
  );
}

/** The defaults a params schema declares (what a new component starts with). */
function defaultsOf(schema) {
  const out = {};
  const skip = new Set(['inputs', 'outputs', 'debug_inputs']);
  for (const [name, prop] of Object.entries((schema && schema.properties) || {})) {
    if (!skip.has(name) && prop && prop.default !== undefined) out[name] = prop.default;
  }
  return out;
}
