// The agent's graph: the SVG the server draws with Graphviz (POST /graphs/export), whose boxes carry
// their component id (the node's tooltip), coloured as the turn's events arrive, and the same states as
// a list (for screen readers and narrow windows).
import { request } from './api.js';
import { h, clear, seconds } from './dom.js';

const XLINK = 'http://www.w3.org/1999/xlink';
export const STATES = ['waiting', 'running', 'done', 'error', 'paused', 'cancelled'];
// How a box is outlined in each state (set as SVG attributes: Chromium does not always repaint an SVG
// shape when only a class on its group changes). The colours match style.css's legend.
const OUTLINE = {
  waiting: { stroke: '#c7ccd4', 'stroke-width': '1', 'stroke-dasharray': 'none' },
  running: { stroke: '#1f6feb', 'stroke-width': '4', 'stroke-dasharray': 'none' },
  done: { stroke: '#2da44e', 'stroke-width': '3', 'stroke-dasharray': 'none' },
  error: { stroke: '#cf222e', 'stroke-width': '4', 'stroke-dasharray': 'none' },
  paused: { stroke: '#bf8700', 'stroke-width': '4', 'stroke-dasharray': '6 3' },
  cancelled: { stroke: '#6e7781', 'stroke-width': '3', 'stroke-dasharray': '2 2' },
};

/** The SVG as elements of this page, without anything active (scripts, event handlers, links, foreign content). */
function safeSvg(text) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (!svg || svg.nodeName !== 'svg' || doc.getElementsByTagName('parsererror').length) return null;
  for (const bad of [...svg.querySelectorAll('script, foreignObject, iframe, use, image, animate, set')]) bad.remove();
  for (const el of [svg, ...svg.querySelectorAll('*')]) {
    for (const attr of [...el.attributes]) {
      const name = attr.name.toLowerCase();
      if (name.startsWith('on') || name === 'href' || name === 'xlink:href' || name === 'style') el.removeAttribute(attr.name);
    }
  }
  return document.importNode(svg, true);
}

export class GraphView {
  constructor() {
    this.picture = h('div', { class: 'graph-picture' });
    this.list = h('ol', { class: 'states', 'aria-label': 'Component states' });
    this.element = h('section', { class: 'card graph', 'aria-labelledby': 'graph-title' },
      h('h2', { id: 'graph-title' }, 'Graph'),
      h('ul', { class: 'legend', 'aria-label': 'Legend' },
        STATES.map(s => h('li', { class: `state-${s}` }, h('span', { class: 'swatch', 'aria-hidden': 'true' }), s))),
      this.picture,
      h('details', { class: 'state-list', open: true }, h('summary', {}, 'Components'), this.list));
    this.nodes = new Map();     // component id -> {box (svg g), item (li), name, type}
  }

  /** Draw the DSL's graph and list its components (ids from the DSL; names from the drawing). */
  async load(dsl) {
    clear(this.picture);
    clear(this.list);
    this.nodes.clear();
    this.upstream = new Map();
    const components = (dsl && dsl.components) || {};
    for (const [id, cpn] of Object.entries(components)) {
      for (const next of (cpn && cpn.downstream) || []) {
        if (!this.upstream.has(next)) this.upstream.set(next, []);
        this.upstream.get(next).push(id);
      }
      const type = (cpn && cpn.obj && cpn.obj.component_name) || '';
      const status = h('span', { class: 'state-text' }, 'waiting');
      const detail = h('span', { class: 'state-detail' });
      const item = h('li', { class: 'state-waiting', dataset: { component: id, state: 'waiting' } },
        h('span', { class: 'swatch', 'aria-hidden': 'true' }), h('code', {}, id), ' ', h('span', { class: 'muted' }, type), ' · ', status, detail);
      this.list.append(item);
      this.nodes.set(id, { item, status, detail, box: null, type });
    }
    let response;
    try {
      response = await request('POST', '/graphs/export', { dsl, format: 'svg' });
    } catch (e) {
      this.picture.append(h('p', { class: 'muted' }, `The picture is not available: ${e.message}`));
      return;
    }
    if (!response.ok) {
      const reply = await response.json().catch(() => ({}));
      this.picture.append(h('p', { class: 'muted' }, `The picture is not available: ${reply.message || response.status}`));
      return;
    }
    const svg = safeSvg(await response.text());
    if (!svg) {
      this.picture.append(h('p', { class: 'muted' }, 'The picture could not be read.'));
      return;
    }
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'The agent graph; component states are listed below it');
    for (const group of svg.querySelectorAll('g.node')) {
      const link = group.querySelector('a');
      const id = link && (link.getAttributeNS(XLINK, 'title') || link.getAttribute('xlink:title') || link.getAttribute('title'));
      if (!id || !this.nodes.has(id)) continue;
      group.dataset.component = id;
      const tip = document.createElementNS('http://www.w3.org/2000/svg', 'title');
      tip.textContent = `${id}: waiting`;
      group.prepend(tip);
      this.nodes.get(id).box = group;
      this.nodes.get(id).tip = tip;
      const known = this.nodes.get(id);           // keep a state set while the picture loaded
      this.set(id, known.item.dataset.state || 'waiting', known.detailText || '');
    }
    this.picture.append(svg);
  }

  /** Every component back to waiting (a new turn). */
  reset() {
    for (const id of this.nodes.keys()) this.set(id, 'waiting');
  }

  /** One component's state; `detail` is shown beside it (elapsed time, error). */
  set(id, state, detail = '') {
    const node = this.nodes.get(id);
    if (!node) return;
    for (const el of [node.item, node.box].filter(Boolean)) {
      for (const s of STATES) el.classList.remove(`state-${s}`);
      el.classList.add(`state-${state}`);
      el.dataset.state = state;
    }
    if (node.box) {
      for (const shape of node.box.querySelectorAll('path, polygon, ellipse')) {
        for (const [name, value] of Object.entries(OUTLINE[state])) shape.setAttribute(name, value);
      }
    }
    node.detailText = detail;
    node.status.textContent = state;
    node.detail.textContent = detail ? ` (${detail})` : '';
    if (node.tip) node.tip.textContent = `${id}: ${state}${detail ? ` (${detail})` : ''}`;
  }

  state(id) {
    const node = this.nodes.get(id);
    return node ? node.item.dataset.state : undefined;
  }

  /** What one RAGFlow event says about the components. */
  apply(event) {
    const data = event.data || {};
    const id = data.component_id;
    switch (event.event) {
      case 'workflow_started':
        this.reset();
        break;
      case 'node_started':
        this.set(id, 'running');
        break;
      case 'node_finished':
        if (data.error) this.set(id, 'error', String(data.error));
        else this.set(id, 'done', seconds(data.elapsed_time));
        break;
      case 'user_inputs':
        for (const cid of this.asking()) this.set(cid, 'paused', 'waiting for the form');
        break;
      default:
        break;
    }
  }

  /** The components a form comes from: those still running, else a UserFillUp whose upstream is done
   * (the pause interrupts it before it reports a start). */
  asking() {
    const running = [...this.nodes].filter(([, n]) => n.item.dataset.state === 'running').map(([cid]) => cid);
    if (running.length) return running;
    return [...this.nodes].filter(([cid, n]) => n.type === 'UserFillUp' && n.item.dataset.state === 'waiting'
      && (this.upstream.get(cid) || []).some(up => this.state(up) === 'done')).map(([cid]) => cid);
  }

  /** The states one traced turn left (its steps from GET .../trace). */
  showSteps(steps) {
    this.reset();
    for (const step of steps) {
      if (step.error) this.set(step.component_id, 'error', String(step.error));
      else if (step.form) this.set(step.component_id, 'paused', 'waiting for the form');
      else this.set(step.component_id, 'done', seconds(step.elapsed));
    }
  }

  /** The turn ended: what still runs was stopped by a cancel or a failure (else it never reported back). */
  finish({ cancelled = false, failed = false } = {}) {
    for (const [cid, node] of this.nodes) {
      if (node.item.dataset.state !== 'running') continue;
      if (cancelled) this.set(cid, 'cancelled');
      else if (failed) this.set(cid, 'cancelled', 'stopped by the error');
      else this.set(cid, 'done');
    }
  }
}
