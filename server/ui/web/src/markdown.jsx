// Model answers as Markdown (tables, code, links) made safe: raw HTML in the text is shown as the
// characters it is (marked's html tokens are escaped), images from elsewhere become links (the CSP would
// refuse them anyway), and DOMPurify cleans what marked made before it reaches the page. This module is
// the only place where the UI writes HTML (a test checks the sources).
import { Marked } from 'marked';
import DOMPurify from 'dompurify';
import './markdown.css';

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const escape = text => String(text).replace(/[&<>"']/g, c => ESCAPES[c]);

const marked = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    html(token) { return escape(token.raw ?? token.text ?? ''); },
    image(token) { return `<a href="${escape(token.href || '')}">${escape(token.text || token.href || 'image')}</a>`; },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', node => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

const PURIFY = { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'img', 'form', 'input', 'button', 'iframe'],
  FORBID_ATTR: ['style', 'class', 'id'] };

/** Markdown text as sanitized HTML. */
export function markdownHtml(text) {
  return DOMPurify.sanitize(marked.parse(String(text || '')), PURIFY);
}

/** Markdown text as the plain text it reads as ("**ERROR**: `x`" -> "ERROR: x"), for places that show text
 * only (a box's one-line detail, a tooltip). */
export function markdownText(text) {
  return new DOMParser().parseFromString(markdownHtml(text), 'text/html').body.textContent.replace(/\s+/g, ' ').trim();
}

/** Split `<think>…</think>` out of an answer (a reopened session keeps them in the text). */
export function splitThinking(text) {
  const thinking = [];
  const answer = String(text || '').replace(/<think>([\s\S]*?)(<\/think>|$)/g, (_, inner) => {
    thinking.push(inner.trim());
    return '';
  });
  return { thinking: thinking.filter(Boolean).join('\n\n'), answer: answer.replace(/^\s+/, '') };
}

export function Markdown({ text, className = 'markdown' }) {
  return <div className={className} dangerouslySetInnerHTML={{ __html: markdownHtml(text) }} />;
}
