// Building the page from data without ever parsing data as markup: every text goes in as a text node.

/** An element: h('button', {type: 'button', onclick: f}, 'Save'). Children are nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'value' || key === 'checked') el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  add(el, children);
  return el;
}

/** Append children (nested arrays allowed; null and false skipped, where `Element.append` would
 * write "null"); strings become text nodes. */
export function add(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** A value as readable JSON text (for <pre> blocks). */
export function pretty(value) {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

/** Seconds as "0.42 s" / "12 ms". */
export function seconds(value) {
  if (typeof value !== 'number' || !isFinite(value)) return '';
  return value < 1 ? `${Math.round(value * 1000)} ms` : `${value.toFixed(2)} s`;
}

/** A status line for the whole page (polite live region). */
export function notify(text, kind = 'info') {
  const box = document.getElementById('notice');
  if (!box) return;
  box.dataset.kind = kind;
  box.textContent = text;
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => { box.textContent = ''; }, 6000);
}

/** A title that may be a string or RAGFlow's {en: ..., zh: ...}. */
export function titleText(value, fallback = '') {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') return value.en || Object.values(value)[0] || fallback;
  return fallback;
}

export function route(...parts) {
  return '#/' + parts.map(p => encodeURIComponent(p)).join('/');
}
