// What changed between two versions of an agent's DSL, as lines a person reads: components added and
// removed, each parameter changed (with its value before and after, shortened), links made and taken away,
// and how many boxes only moved.
import { componentsOf, typeOf } from './util.js';

const SHORT = 80;

/** A value as a short text: strings as they are, anything else as JSON, cut at SHORT characters. */
export function shortValue(value) {
  const text = value === undefined ? '(none)' : typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value);
  return text.length > SHORT ? `${text.slice(0, SHORT - 1)}…` : text;
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function links(dsl) {
  const out = new Set();
  for (const [id, cpn] of Object.entries(componentsOf(dsl))) for (const d of (cpn && cpn.downstream) || []) out.add(`${id} → ${d}`);
  return out;
}

function positions(dsl) {
  const nodes = (dsl && dsl.graph && Array.isArray(dsl.graph.nodes)) ? dsl.graph.nodes : [];
  return new Map(nodes.filter(n => n && n.id && n.position).map(n => [n.id, n.position]));
}

/** The changes from `before` to `after`, each {kind: added|removed|param|linked|unlinked|moved, text}. */
export function diffDsl(before, after) {
  const a = componentsOf(before);
  const b = componentsOf(after);
  const out = [];
  for (const id of Object.keys(b)) if (!a[id]) out.push({ kind: 'added', text: `Added ${id} (${typeOf(b[id])})` });
  for (const id of Object.keys(a)) if (!b[id]) out.push({ kind: 'removed', text: `Removed ${id} (${typeOf(a[id])})` });
  for (const id of Object.keys(b)) {
    if (!a[id]) continue;
    const was = (a[id].obj && a[id].obj.params) || {};
    const now = (b[id].obj && b[id].obj.params) || {};
    for (const key of [...new Set([...Object.keys(was), ...Object.keys(now)])].sort()) {
      if (!same(was[key], now[key])) out.push({ kind: 'param', text: `${id}: ${key} changed from ${shortValue(was[key])} to ${shortValue(now[key])}` });
    }
  }
  const la = links(before);
  const lb = links(after);
  for (const l of lb) if (!la.has(l)) out.push({ kind: 'linked', text: `Linked ${l}` });
  for (const l of la) if (!lb.has(l)) out.push({ kind: 'unlinked', text: `Unlinked ${l}` });
  const pa = positions(before);
  const moved = [...positions(after)].filter(([id, p]) => a[id] && b[id] && pa.has(id) && !same(pa.get(id), p)).length;
  if (moved) out.push({ kind: 'moved', text: `${moved} box${moved > 1 ? 'es' : ''} moved` });
  return out;
}
