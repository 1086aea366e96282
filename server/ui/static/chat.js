// A conversation as the page shows it: messages (text only: model output is never markup), the answer
// streaming in, citations, downloads, Begin/UserFillUp forms, and errors.
import { download } from './api.js';
import { h, clear, notify } from './dom.js';
import { inputsForm } from './forms.js';

function chunkList(reference) {
  if (!reference) return [];
  const chunks = Array.isArray(reference) ? reference : reference.chunks;
  if (Array.isArray(chunks)) return chunks;
  if (chunks && typeof chunks === 'object') return Object.values(chunks);
  return [];
}

export class ChatView {
  constructor({ agentId, label = 'Conversation' }) {
    this.agentId = agentId;
    this.log = h('ol', { class: 'messages', 'aria-label': label, 'aria-live': 'polite' });
    this.element = this.log;
    this.answer = null;           // the assistant message being streamed
  }

  clear() {
    clear(this.log);
    this.answer = null;
  }

  scroll() {
    this.log.scrollTop = this.log.scrollHeight;
  }

  /** One message of the history: {role, content, reference}. */
  message(role, content, reference) {
    const text = h('div', { class: 'text' }, content || '');
    const item = h('li', { class: `message ${role}` }, h('span', { class: 'role' }, role === 'user' ? 'You' : 'Agent'), text);
    this.log.append(item);
    this.citations(item, reference);
    this.scroll();
    return { item, text };
  }

  citations(item, reference) {
    const chunks = chunkList(reference);
    if (!chunks.length) return;
    item.append(h('details', { class: 'citations' }, h('summary', {}, `Sources (${chunks.length})`),
      h('ol', {}, chunks.map(c => h('li', {},
        h('strong', {}, c.document_name || c.docnm_kwd || c.doc_name || c.document_id || 'document'), ': ',
        String(c.content || c.content_with_weight || '').slice(0, 600))))));
  }

  downloads(item, files) {
    if (!Array.isArray(files) || !files.length) return;
    item.append(h('div', { class: 'downloads' }, files.map(f => {
      const name = f.filename || f.name || f.doc_id || 'file';
      return h('button', { type: 'button', class: 'link', onclick: async () => {
        try { await download(`/agents/attachments/${encodeURIComponent(f.doc_id || f.id)}/download`, name); } catch (e) { notify(e.message, 'error'); }
      } }, `Download ${name}`);
    })));
  }

  notice(text, kind = 'info') {
    const item = h('li', { class: `message notice-${kind}`, role: kind === 'error' ? 'alert' : null }, text);
    this.log.append(item);
    this.scroll();
    return item;
  }

  form(options) {
    const form = inputsForm({ agentId: this.agentId, ...options });
    const item = h('li', { class: 'message form' }, form);
    this.log.append(item);
    this.scroll();
    const first = form.querySelector('input, textarea, select');
    if (first) first.focus();
    return form;
  }

  /** What one RAGFlow event adds to the conversation; `onForm(inputs, tips)` shows a pause's form. */
  apply(event, onForm) {
    const data = event.data || {};
    if (!event.event && event.code && event.code !== 0) {      // the stream's error frame
      this.notice(event.message || 'The turn failed.', 'error');
      return;
    }
    switch (event.event) {
      case 'message': {
        if (!this.answer) this.answer = { ...this.message('assistant', ''), thinking: null };
        if (data.start_to_think) {
          this.answer.thinking = h('details', { class: 'thinking' }, h('summary', {}, 'Thinking'));
          this.answer.text.append(this.answer.thinking);
        } else if (data.end_to_think) {
          this.answer.thinking = null;
        }
        const content = data.content || '';
        if (content) (this.answer.thinking || this.answer.text).append(document.createTextNode(content));
        this.scroll();
        break;
      }
      case 'message_end':
        if (this.answer) {
          this.citations(this.answer.item, data.reference);
          this.downloads(this.answer.item, data.downloads);
        }
        this.answer = null;
        break;
      case 'node_finished':
        if (data.error) this.notice(`${data.component_name || data.component_id}: ${data.error}`, 'error');
        break;
      case 'user_inputs':
        this.answer = null;
        if (onForm) onForm(data.inputs || {}, data.tips || '');
        break;
      case 'workflow_finished': {
        const outputs = data.outputs || {};
        if (outputs._ERROR) this.notice(String(outputs._ERROR), 'error');
        this.answer = null;
        break;
      }
      default:
        break;
    }
  }
}
