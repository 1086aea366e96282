// Text that holds references, as RAGFlow's prompt editor edits it: a reference shows as a chip (the
// component's name and output, "Billing › content"), is saved as RAGFlow saves it (`{LLM:Billing@content}`,
// `{sys.query}`), and is inserted from a picker, not typed: `/` or `{` opens the list of what is in scope
// at this component (scope.js); typing filters it, arrow keys and Enter (or a click) choose, Escape closes.
// References typed by hand, pasted, or loaded from a DSL become chips too.
//
// RefText is a small contenteditable editor: its value is the plain string; the DOM (text nodes and chip
// spans) is rebuilt from it whenever it changes from outside or the browser's own editing leaves anything
// else behind. Paste is plain text; undo and redo (Ctrl+Z, Ctrl+Shift+Z / Ctrl+Y) are its own, because
// rebuilding the DOM breaks the browser's. RefSelect is a field that holds one reference (RAGFlow's
// `query`, a Switch condition's `cpn_id`, an Iteration's `items_ref`): a list of what is in scope.
import { createContext, useContext, useId, useLayoutEffect, useRef, useState } from 'react';
import { REF_IN_TEXT, bareRef, filterScope, refLabel } from './scope.js';
import './refeditor.css';

/** {dsl, groups}: the DSL being edited and what the component whose form this is can reference. */
export const ScopeContext = createContext({ dsl: null, groups: [] });
export const useScope = () => useContext(ScopeContext);

const BARE_REF = /^([a-zA-Z0-9_:]+@[A-Za-z0-9_.-]+|sys\.[A-Za-z0-9_.]+|env\.[A-Za-z0-9_.]+)$/;
const ZWSP = '\u200B';          // keeps a place for the caret beside a chip; never part of the value
const stripZ = s => s.split(ZWSP).join('');

/** The value a DOM subtree shows: text, chips as `{ref}`, line breaks as "\n". */
function serialize(root) {
  let out = '';
  const walk = (node, first) => {
    if (node.nodeType === Node.TEXT_NODE) { out += stripZ(node.data); return; }
    if (node.nodeType !== Node.ELEMENT_NODE && node.nodeType !== Node.DOCUMENT_FRAGMENT_NODE) return;
    if (node.dataset && node.dataset.ref) { out += `{${node.dataset.ref}}`; return; }
    if (node.nodeName === 'BR') { if (!node.dataset.filler) out += '\n'; return; }
    const block = node.nodeName === 'DIV' || node.nodeName === 'P';
    if (block && !first && out && !out.endsWith('\n')) out += '\n';
    node.childNodes.forEach((child, i) => walk(child, i === 0));
  };
  root.childNodes.forEach((child, i) => walk(child, i === 0));
  return out;
}

/** Replace what `el` shows with `text`: text nodes, and a chip per reference. */
function render(el, text, dsl, known) {
  const parts = [];
  const textNode = s => document.createTextNode(s || ZWSP);
  let last = 0;
  for (const m of text.matchAll(REF_IN_TEXT)) {
    parts.push(textNode(text.slice(last, m.index)));
    const chip = document.createElement('span');
    chip.className = known.has(m[1]) ? 'ref-chip' : 'ref-chip ref-unknown';
    chip.contentEditable = 'false';
    chip.dataset.ref = m[1];
    chip.title = known.has(m[1]) ? `{${m[1]}}` : `{${m[1]}}: not upstream of this component`;
    chip.textContent = refLabel(dsl, m[1]);
    parts.push(chip);
    last = m.index + m[0].length;
  }
  parts.push(textNode(text.slice(last)));
  if (text.endsWith('\n')) {        // a last empty line shows only with something after it
    const br = document.createElement('br');
    br.dataset.filler = '1';
    parts.push(br);
  }
  el.replaceChildren(...parts);
}

/** Whether the browser's editing left `el` in a shape render() would not give for `text`. */
function untidy(el, text) {
  const chips = [...text.matchAll(REF_IN_TEXT)].length;
  let seen = 0;
  for (const n of el.childNodes) {
    if (n.nodeType === Node.TEXT_NODE) continue;
    if (n.dataset && n.dataset.ref) { seen++; continue; }
    if (n.nodeName === 'BR' && n.dataset.filler && text.endsWith('\n')) continue;
    return true;
  }
  return seen !== chips || (text.endsWith('\n') && !(el.lastChild && el.lastChild.nodeName === 'BR'));
}

/** The offset in the value of a DOM position inside `el`. */
function offsetOf(el, node, offset) {
  const range = document.createRange();
  range.setStart(el, 0);
  range.setEnd(node, offset);
  return serialize(range.cloneContents()).length;
}

/** [start, end] of the selection in the value, or null when it is not in `el`. */
function selectionIn(el) {
  const sel = window.getSelection();
  if (!sel || !sel.rangeCount) return null;
  const r = sel.getRangeAt(0);
  if (!el.contains(r.startContainer) || !el.contains(r.endContainer)) return null;
  return [offsetOf(el, r.startContainer, r.startOffset), offsetOf(el, r.endContainer, r.endOffset)];
}

/** Put the caret at `offset` of the value (el as render() left it). */
function placeCaret(el, offset) {
  let left = offset;
  let at = null;
  for (const n of el.childNodes) {
    if (n.nodeType === Node.TEXT_NODE) {
      const len = stripZ(n.data).length;
      if (left <= len) {
        let physical = 0;
        for (let seen = 0; physical < n.data.length && (seen < left || n.data[physical] === ZWSP); physical++) if (n.data[physical] !== ZWSP) seen++;
        at = [n, physical];
        break;
      }
      left -= len;
    } else if (n.dataset && n.dataset.ref) {
      left -= n.dataset.ref.length + 2;
    }
  }
  if (!at) {
    const texts = [...el.childNodes].filter(n => n.nodeType === Node.TEXT_NODE);
    const end = texts[texts.length - 1];
    at = end ? [end, end.data.length] : [el, el.childNodes.length];
  }
  const range = document.createRange();
  range.setStart(at[0], at[1]);
  range.collapse(true);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
}

/** The box that scrolls `el` into view (the inspector), or the window's. */
function scroller(el) {
  for (let at = el.parentElement; at; at = at.parentElement) {
    if (/(auto|scroll)/.test(getComputedStyle(at).overflowY)) return at.getBoundingClientRect();
  }
  return { top: 0, bottom: window.innerHeight };
}

/** Where the picker goes, relative to `box`: under the caret, or above it when there is no room below. */
function caretPlace(box) {
  const sel = window.getSelection();
  const outer = box.getBoundingClientRect();
  let rect = sel && sel.rangeCount ? sel.getRangeAt(0).getBoundingClientRect() : null;
  if (!rect || (!rect.width && !rect.height && !rect.left)) rect = outer;
  const left = Math.max(0, Math.min(rect.left - outer.left, outer.width - 240));
  const view = scroller(box);
  const below = Math.min(view.bottom, window.innerHeight) - rect.bottom;
  const above = rect.top - Math.max(view.top, 0);
  if (below < 200 && above > below) return { left, bottom: outer.bottom - rect.top + 4 };
  return { left, top: rect.bottom - outer.top + 4 };
}

/** The list the picker shows: options grouped under their component, the active one highlighted. */
function PickerList({ id, options, active, onChoose, onHover, place }) {
  const listRef = useRef(null);
  useLayoutEffect(() => {
    const el = listRef.current && listRef.current.querySelector('[aria-selected="true"]');
    if (el && el.scrollIntoView) el.scrollIntoView({ block: 'nearest' });
  }, [active]);
  let group = null;
  return (
    <ul id={id} ref={listRef} role="listbox" aria-label="References in scope" className="ref-picker" style={place}
      onMouseDown={e => e.preventDefault() /* keep the caret in the editor */}>
      {options.length ? options.map((o, i) => {
        const head = o.group !== group ? (group = o.group) : null;
        return [
          head ? <li key={`g-${head}`} role="presentation" className="ref-picker-group">{head}</li> : null,
          <li key={o.ref} id={`${id}-${i}`} role="option" aria-selected={i === active} className={i === active ? 'active' : ''}
            aria-label={`${o.label}, ${o.type}`} onClick={() => onChoose(o)} onMouseEnter={() => onHover(i)}>
            <span className="ref-option-label">{o.label}</span><span className="ref-option-type">{o.type}</span>
          </li>,
        ];
      }) : <li role="presentation" className="ref-picker-empty">Nothing in scope matches.</li>}
    </ul>
  );
}

/**
 * A text field whose references are chips. `value` is the saved string; `onChange` gets the new one.
 * `multiline` lets Enter start a new line (else Enter does nothing). `labelledBy` names the label's id.
 */
export function RefText({ id, value, onChange, multiline = true, labelledBy, label, describedBy, invalid, placeholder, bareWhole = false }) {
  const { dsl, groups } = useScope();
  const el = useRef(null);
  const shown = useRef(null);                     // the value the DOM shows
  const undo = useRef({ past: [], future: [], last: 0 });
  const [picker, setPicker] = useState(null);     // {start, query, active, place}
  const listId = `${useId().replace(/:/g, '')}-refs`;
  const known = new Set(groups.flatMap(g => g.options.map(o => o.ref)));
  const raw = typeof value === 'string' ? value : value === undefined || value === null ? '' : String(value);
  // `bareWhole`: a value that is one bare reference (`sys.query`, as RAGFlow saves a Retrieval's query, which
  // the engine reads as that reference) reads as its chip; in a prompt the same text is only text
  const text = bareWhole && BARE_REF.test(raw) ? `{${raw}}` : raw;

  useLayoutEffect(() => {
    if (text !== shown.current) {
      render(el.current, text, dsl, known);
      shown.current = text;
    }
  });

  const options = picker ? filterScope(groups, picker.query) : [];
  const active = picker ? Math.min(picker.active, Math.max(0, options.length - 1)) : 0;

  function commit(next, caret, typing) {
    if (next === shown.current) return;
    const u = undo.current;
    const now = Date.now();
    if (!(typing && u.typing && now - u.last < 800)) u.past.push({ text: shown.current, caret });
    if (u.past.length > 200) u.past.shift();
    u.future = [];
    u.last = now;
    u.typing = typing;
    shown.current = next;
    onChange(next);
  }
  function show(next, caret) {
    render(el.current, next, dsl, known);
    placeCaret(el.current, caret);
  }
  /** Put `insert` where the selection is (replacing it); `from` moves the start back (the picker's query). */
  function replaceSelection(insert, from = null) {
    const [start, end] = selectionIn(el.current) || [shown.current.length, shown.current.length];
    const begin = from === null ? start : from;
    const next = shown.current.slice(0, begin) + insert + shown.current.slice(end);
    show(next, begin + insert.length);
    commit(next, begin + insert.length, false);
  }
  function choose(option) {
    replaceSelection(`{${option.ref}}`, picker.start);
    setPicker(null);
  }
  function step(kind) {
    const u = undo.current;
    const from = kind === 'undo' ? u.past : u.future;
    if (!from.length) return;
    const to = kind === 'undo' ? u.future : u.past;
    const was = selectionIn(el.current);
    to.push({ text: shown.current, caret: was ? was[0] : shown.current.length });
    const s = from.pop();
    shown.current = s.text;
    u.typing = false;
    show(s.text, Math.min(s.caret, s.text.length));
    onChange(s.text);
  }

  function onInput(event) {
    const box = el.current;
    const next = serialize(box);
    const sel = selectionIn(box);
    const caret = sel ? sel[1] : next.length;
    if (untidy(box, next)) show(next, caret);
    commit(next, caret, true);
    const typed = event.nativeEvent && event.nativeEvent.data;
    if (typed === '/' || typed === '{') {
      setPicker({ start: caret - 1, query: '', active: 0, place: caretPlace(box.parentElement) });
    } else if (picker) {
      const query = next.slice(picker.start + 1, caret);
      if (caret <= picker.start || next[picker.start] !== '/' && next[picker.start] !== '{' || /[\s}]/.test(query)) setPicker(null);
      else setPicker({ ...picker, query, active: 0 });
    }
  }
  function onKeyDown(event) {
    const mod = event.ctrlKey || event.metaKey;
    if (picker) {
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
        event.preventDefault();
        const n = options.length || 1;
        setPicker({ ...picker, active: (active + (event.key === 'ArrowDown' ? 1 : n - 1)) % n });
        return;
      }
      if ((event.key === 'Enter' || event.key === 'Tab') && options.length) { event.preventDefault(); choose(options[active]); return; }
      if (event.key === 'Escape') { event.preventDefault(); event.stopPropagation(); setPicker(null); return; }
    }
    if (mod && event.key.toLowerCase() === 'z') {
      event.preventDefault(); event.stopPropagation(); step(event.shiftKey ? 'redo' : 'undo'); return;
    }
    if (mod && event.key.toLowerCase() === 'y') { event.preventDefault(); event.stopPropagation(); step('redo'); return; }
    if (event.key === 'Enter') {
      event.preventDefault();
      if (multiline) replaceSelection('\n');
      return;
    }
    if ((event.key === 'ArrowLeft' || event.key === 'ArrowRight') && !mod && !event.altKey && !event.shiftKey) {
      // one key press per character or chip: the caret's invisible place-holders are stepped over
      const sel = selectionIn(el.current);
      if (!sel) return;
      event.preventDefault();
      const left = event.key === 'ArrowLeft';
      if (sel[0] !== sel[1]) { placeCaret(el.current, left ? sel[0] : sel[1]); return; }
      const refs = [...shown.current.matchAll(REF_IN_TEXT)];
      const chip = refs.find(m => (left ? m.index + m[0].length === sel[0] : m.index === sel[0]));
      const to = chip ? (left ? chip.index : chip.index + chip[0].length) : sel[0] + (left ? -1 : 1);
      placeCaret(el.current, Math.max(0, Math.min(shown.current.length, to)));
      if (picker) setPicker(null);
      return;
    }
    if ((event.key === 'Backspace' || event.key === 'Delete') && !mod && !event.altKey) {
      // a chip goes whole, and the caret's invisible place-holders never take a key press of their own
      const sel = selectionIn(el.current);
      if (!sel) return;
      event.preventDefault();
      const [start, end] = sel;
      if (start !== end) { replaceSelection(''); return; }
      const text = shown.current;
      const refs = [...text.matchAll(REF_IN_TEXT)];
      const back = event.key === 'Backspace';
      const chip = refs.find(m => (back ? m.index + m[0].length === start : m.index === start));
      const [from, to] = chip ? [chip.index, chip.index + chip[0].length] : back ? [Math.max(0, start - 1), start] : [start, Math.min(text.length, start + 1)];
      if (from === to) return;
      const next = text.slice(0, from) + text.slice(to);
      show(next, from);
      commit(next, from, true);
      if (picker && from <= picker.start) setPicker(null);
      else if (picker) setPicker({ ...picker, query: next.slice(picker.start + 1, from), active: 0 });
    }
  }
  function onPaste(event) {
    event.preventDefault();
    let pasted = event.clipboardData.getData('text/plain') || '';
    if (!multiline) pasted = pasted.replace(/\s*\n\s*/g, ' ');
    replaceSelection(pasted.replace(/\r\n?/g, '\n'));
  }

  return (
    <div className="ref-text-box">
      <div id={id} ref={el} className={`ref-text${multiline ? ' multiline' : ''}`} contentEditable suppressContentEditableWarning
        role="textbox" aria-multiline={multiline} aria-labelledby={labelledBy} aria-label={labelledBy ? undefined : label}
        aria-describedby={describedBy} aria-invalid={invalid || undefined} data-placeholder={placeholder || 'Type / or { to insert a reference'}
        aria-haspopup="listbox" aria-expanded={Boolean(picker)} aria-controls={picker ? listId : undefined}
        aria-activedescendant={picker && options.length ? `${listId}-${active}` : undefined}
        spellCheck="false" onInput={onInput} onKeyDown={onKeyDown} onPaste={onPaste} onDrop={e => e.preventDefault()}
        onBlur={() => setPicker(null)} />
      {picker ? <PickerList id={listId} options={options} active={active} onChoose={choose} place={picker.place}
        onHover={i => setPicker(p => ({ ...p, active: i }))} /> : null}
    </div>
  );
}

/** A field that holds one reference, kept bare (`sys.query`) or braced when `braced`. A value that is not
 * in scope stays, marked as such, until another is chosen. */
export function RefSelect({ id, value, onChange, braced = false, describedBy, invalid, label, allowEmpty = true }) {
  const { dsl, groups } = useScope();
  const bare = bareRef(value);
  const known = groups.some(g => g.options.some(o => o.ref === bare));
  return (
    <select id={id} className="ref-select" value={bare} aria-describedby={describedBy} aria-invalid={invalid || undefined} aria-label={label}
      onChange={e => onChange(e.target.value ? (braced ? `{${e.target.value}}` : e.target.value) : '')}>
      {allowEmpty || !bare ? <option value="">(choose a reference)</option> : null}
      {bare && !known ? <option value={bare}>{refLabel(dsl, bare)} (not upstream)</option> : null}
      {groups.map(g => (
        <optgroup key={g.title} label={g.title}>
          {g.options.map(o => <option key={o.ref} value={o.ref}>{`${o.label} · ${o.type}`}</option>)}
        </optgroup>
      ))}
    </select>
  );
}
