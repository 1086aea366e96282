// The API under /api/v1 with the tenant's token. The token lives in sessionStorage (gone when the tab
// closes) and travels in the Authorization header only: never in a URL, never written into the page.

const KEY = 'canvas2graph.token';
const BASE = '/api/v1';

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: value => sessionStorage.setItem(KEY, value),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(message, { code = -1, data = null, status = 0 } = {}) {
    super(message);
    this.code = code;
    this.data = data;
    this.status = status;
  }
}

function headers(json) {
  const out = {};
  const t = token.get();
  if (t) out.Authorization = `Bearer ${t}`;
  if (json) out['Content-Type'] = 'application/json';
  return out;
}

function init(method, body, signal) {
  const form = body instanceof FormData;
  const options = { method, headers: headers(body !== undefined && !form), signal, cache: 'no-store' };
  if (body !== undefined) options.body = form ? body : JSON.stringify(body);
  return options;
}

/** The raw response (pictures, downloads). */
export async function request(method, path, body, signal) {
  return fetch(BASE + path, init(method, body, signal));
}

/** RAGFlow's envelope: the `data` of {code: 0, data}, or an ApiError with the server's message. */
export async function api(method, path, body) {
  const response = await request(method, path, body);
  let reply;
  try {
    reply = await response.json();
  } catch {
    throw new ApiError(`the server answered HTTP ${response.status} without JSON`, { status: response.status });
  }
  if (!reply || reply.code !== 0) {
    const message = (reply && reply.message) || `HTTP ${response.status}`;
    throw new ApiError(message, { code: reply && reply.code, data: reply && reply.data, status: response.status });
  }
  return reply.data;
}

/** POST and read the SSE reply (`data:<json>` frames ending with `data:[DONE]`), calling onEvent per event. */
export async function stream(path, body, onEvent, signal) {
  const response = await request('POST', path, body, signal);
  const type = response.headers.get('content-type') || '';
  if (!type.startsWith('text/event-stream')) {
    const reply = await response.json().catch(() => ({}));
    throw new ApiError(reply.message || `HTTP ${response.status}`, { code: reply.code, data: reply.data, status: response.status });
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!frame.startsWith('data:')) continue;
      const payload = frame.slice(5).trim();
      if (payload === '[DONE]') return;
      let event;
      try { event = JSON.parse(payload); } catch { continue; }
      onEvent(event);
    }
  }
}

/** Save a blob as a file (a download the browser offers; the blob URL is revoked soon after). */
export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename || 'download';
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30000);
}

/** Download a file the tenant may read (an upload or an artifact), with the token in the header. */
export async function download(path, filename) {
  const response = await request('GET', path);
  if (!response.ok) {
    const reply = await response.json().catch(() => ({}));
    throw new ApiError(reply.message || `HTTP ${response.status}`, { status: response.status });
  }
  saveBlob(await response.blob(), filename);
}
