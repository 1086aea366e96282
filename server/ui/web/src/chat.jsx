// A conversation as the page shows it: messages (answers as sanitized Markdown with their thinking),
// citations, produced files, Begin/UserFillUp forms, notices, and each turn's time and tokens. The
// conversation is a list of items changed by `chatReducer`, one action per RAGFlow event.
import { useEffect, useRef } from 'react';
import { download } from './api.js';
import { InputsForm } from './forms.jsx';
import { Markdown, splitThinking } from './markdown.jsx';
import { CANCELLED } from './runstate.js';
import { plainError, seconds, usageText } from './util.js';

let serial = 0;
const key = () => `item-${++serial}`;

function chunkList(reference) {
  if (!reference) return [];
  const chunks = Array.isArray(reference) ? reference : reference.chunks;
  if (Array.isArray(chunks)) return chunks;
  if (chunks && typeof chunks === 'object') return Object.values(chunks);
  return [];
}

function streamingIndex(items) {
  const i = items.length - 1;
  return i >= 0 && items[i].kind === 'message' && items[i].streaming ? i : -1;
}

function endStreaming(items) {
  const i = streamingIndex(items);
  if (i < 0) return items;
  const copy = items.slice();
  copy[i] = { ...copy[i], streaming: false };
  return copy;
}

function withLast(items, index, change) {
  const copy = items.slice();
  copy[index] = { ...copy[index], ...change };
  return copy;
}

/** The conversation's items after one action. */
export function chatReducer(items, action) {
  switch (action.type) {
    case 'clear': return [];
    case 'message': {
      const { thinking, answer } = action.role === 'assistant' ? splitThinking(action.content) : { thinking: '', answer: action.content };
      return [...endStreaming(items), { kind: 'message', key: key(), role: action.role, text: answer || '', thinking,
        reference: action.reference, downloads: action.downloads, meta: action.meta || '' }];
    }
    case 'notice': return [...endStreaming(items), { kind: 'notice', key: key(), level: action.level || 'info', text: action.text }];
    case 'form': return [...endStreaming(items), { kind: 'form', key: key(), ...action.form, done: false }];
    case 'forms-done': return items.map(i => (i.kind === 'form' && !i.done ? { ...i, done: true } : i));
    case 'keep-waiting-forms': return items.filter(i => i.kind === 'form' && !i.done);
    case 'turn-meta': {
      // a turn's time and tokens go under its last answer (or stand alone when it had none)
      for (let i = items.length - 1; i >= 0; i--) {
        if (items[i].kind === 'message' && items[i].role === 'user') break;       // this turn's items only
        if (items[i].kind === 'message' && items[i].role === 'assistant') return withLast(items, i, { meta: action.text, streaming: false });
      }
      return [...items, { kind: 'notice', key: key(), level: 'meta', text: action.text }];
    }
    case 'event': return applyEvent(items, action.event);
    default: return items;
  }
}

function applyEvent(items, event) {
  const data = event.data || {};
  if (!event.event && event.code && event.code !== 0) {       // the stream's error frame
    return chatReducer(items, { type: 'notice', level: 'error', text: plainError(event.message || 'The turn failed.') });
  }
  switch (event.event) {
    case 'message': {
      let i = streamingIndex(items);
      if (i < 0) {
        items = [...items, { kind: 'message', key: key(), role: 'assistant', text: '', thinking: '', streaming: true, mode: 'answer' }];
        i = items.length - 1;
      }
      const current = items[i];
      if (data.start_to_think) return withLast(items, i, { mode: 'thinking' });
      if (data.end_to_think) return withLast(items, i, { mode: 'answer' });
      const content = data.content || '';
      if (!content) return items;
      return withLast(items, i, current.mode === 'thinking' ? { thinking: current.thinking + content } : { text: current.text + content });
    }
    case 'message_end': {
      const i = streamingIndex(items);
      if (i < 0) return items;
      return withLast(items, i, { reference: data.reference, downloads: data.downloads, streaming: false, ended: true });
    }
    case 'node_finished':
      // a component a cancel stopped is no error: the turn's end says it was cancelled
      if (data.error && data.error !== CANCELLED) return chatReducer(items, { type: 'notice', level: 'error', text: `${data.component_name || data.component_id}: ${plainError(data.error)}` });
      return items;
    case 'user_inputs': return endStreaming(items);
    case 'workflow_finished': {
      const outputs = data.outputs || {};
      if (outputs && outputs._ERROR) return chatReducer(items, { type: 'notice', level: 'error', text: plainError(String(outputs._ERROR)) });
      return endStreaming(items);
    }
    default: return items;
  }
}

/** "2.10 s · 16 in / 22 out" for a finished turn (workflow_finished's elapsed_time and usage). */
export function turnMeta(data) {
  return [seconds(data && data.elapsed_time), usageText(data && data.usage)].filter(Boolean).join(' · ');
}

function Citations({ reference }) {
  const chunks = chunkList(reference);
  if (!chunks.length) return null;
  return (
    <details className="citations">
      <summary>Sources ({chunks.length})</summary>
      <ol>{chunks.map((c, i) => (
        <li key={i}><strong>{c.document_name || c.docnm_kwd || c.doc_name || c.document_id || 'document'}</strong>: {String(c.content || c.content_with_weight || '').slice(0, 600)}</li>
      ))}</ol>
    </details>
  );
}

function Downloads({ files, onError }) {
  if (!Array.isArray(files) || !files.length) return null;
  return (
    <div className="downloads">{files.map((f, i) => {
      const name = f.filename || f.name || f.doc_id || 'file';
      const get = async () => {
        try { await download(`/agents/attachments/${encodeURIComponent(f.doc_id || f.id)}/download`, name); } catch (e) { onError(e.message); }
      };
      return <button key={i} type="button" className="link" onClick={get}>Download {name}</button>;
    })}</div>
  );
}

function Message({ item, onError }) {
  const who = item.role === 'user' ? 'You' : 'Agent';
  return (
    <li className={`message ${item.role}${item.streaming ? ' streaming' : ''}`}>
      <span className="role">{who}</span>
      {item.thinking ? <details className="thinking"><summary>Thinking</summary><div className="thinking-text">{item.thinking}</div></details> : null}
      {item.role === 'assistant' ? <Markdown text={item.text} className="text markdown" /> : <div className="text">{item.text}</div>}
      <Citations reference={item.reference} />
      <Downloads files={item.downloads} onError={onError} />
      {item.meta ? <div className="turn-meta muted">{item.meta}</div> : null}
    </li>
  );
}

/** A turn that a fork ran again: which version shows ("‹ 2/2 ›"), and where the fork started. `item`:
 * {number: the turn's, index, count, fork: the shown version's {component_id} when it is a fork, onPick(i)}. */
function Versions({ item }) {
  const { number, index, count, fork, onPick } = item;
  return (
    <li className="message versions" role="group" aria-label={`Versions of turn ${number}`}>
      <span className="muted">Turn {number}</span>
      {/* aria-disabled, not disabled: the button keeps the focus when it reaches the first or last version */}
      <button type="button" className="version-step" aria-label={`Previous version of turn ${number}`} aria-disabled={index === 0}
        onClick={() => index > 0 && onPick(index - 1)}>‹</button>
      <span className="version-count" aria-live="polite">{index + 1}/{count}</span>
      <button type="button" className="version-step" aria-label={`Next version of turn ${number}`} aria-disabled={index === count - 1}
        onClick={() => index < count - 1 && onPick(index + 1)}>›</button>
      {fork && fork.component_id ? <span className="muted">run again from <code>{fork.component_id}</code></span> : null}
    </li>
  );
}

/** The conversation: `items` from chatReducer (and a 'versions' switcher before a turn a fork ran
 * again); `agentId` for the forms' uploads. */
export function Chat({ items, agentId, label = 'Conversation', onError = () => {} }) {
  const log = useRef(null);
  useEffect(() => {
    if (!log.current) return;
    log.current.scrollTop = log.current.scrollHeight;
    // a version switcher just used stays where the eye is (the answers below it changed)
    const active = document.activeElement;
    if (active && log.current.contains(active) && active.closest('.versions')) active.scrollIntoView({ block: 'nearest' });
  }, [items]);
  return (
    <ol ref={log} className="messages" aria-label={label} aria-live="polite">
      {items.map(item => {
        if (item.kind === 'message') return <Message key={item.key} item={item} onError={onError} />;
        if (item.kind === 'versions') return <Versions key={item.key} item={item} />;
        if (item.kind === 'notice') {
          // an error's text comes from the engine or a model (RAGFlow's "**ERROR**: ..."): Markdown
          return item.level === 'error'
            ? <li key={item.key} className="message notice-error" role="alert"><Markdown text={item.text} className="notice-text markdown" /></li>
            : <li key={item.key} className={`message notice-${item.level}`}>{item.text}</li>;
        }
        return (
          <li key={item.key} className="message form">
            <InputsForm title={item.title} tips={item.tips} inputs={item.inputs} agentId={agentId} submitLabel={item.submitLabel}
              done={item.done} onSubmit={item.onSubmit} />
          </li>
        );
      })}
    </ol>
  );
}
