// Small pure helpers shared by the panels: formatting numbers, times, titles and routes.

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

/** A title that may be a string or RAGFlow's {en: ..., zh: ...}. */
export function titleText(value, fallback = '') {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') return value.en || Object.values(value)[0] || fallback;
  return fallback;
}

export function route(...parts) {
  return '#/' + parts.map(p => encodeURIComponent(p)).join('/');
}

/** A time as "3 min ago" (RAGFlow's dates are "YYYY-MM-DD HH:MM:SS" or epoch milliseconds). */
export function relativeTime(value, now = Date.now()) {
  const when = toDate(value);
  if (!when) return '';
  const diff = Math.round((now - when.getTime()) / 1000);
  if (diff < 45) return 'just now';
  // [seconds a unit holds, its name, the age from which the next unit takes over]
  const units = [[60, 'min', 3600], [3600, 'h', 24 * 3600], [86400, 'd', 30 * 86400]];
  for (const [size, name, limit] of units) {
    if (diff < limit) return `${Math.max(1, Math.round(diff / size))} ${name} ago`;
  }
  return when.toISOString().slice(0, 10);
}

export function toDate(value) {
  if (value === null || value === undefined || value === '') return null;
  if (typeof value === 'number') return new Date(value > 1e12 ? value : value * 1000);
  const text = String(value);
  const date = new Date(/^\d{4}-\d\d-\d\d \d/.test(text) ? text.replace(' ', 'T') : text);
  return isNaN(date.getTime()) ? null : date;
}

/** Token usage as "16 in / 22 out". */
export function usageText(usage) {
  if (!usage || typeof usage !== 'object') return '';
  const into = usage.prompt_tokens ?? usage.input_tokens;
  const out = usage.completion_tokens ?? usage.output_tokens;
  if (into === undefined && out === undefined) return usage.total_tokens !== undefined ? `${usage.total_tokens} tokens` : '';
  return `${into ?? 0} in / ${out ?? 0} out`;
}

/** The DSL's component entries, by id. */
export function componentsOf(dsl) {
  return (dsl && typeof dsl === 'object' && dsl.components && typeof dsl.components === 'object') ? dsl.components : {};
}

export function typeOf(cpn) {
  return (cpn && cpn.obj && cpn.obj.component_name) || '';
}

/** A server error message in plain words: no internal codes or session ids. */
export function plainError(message) {
  let text = String(message || 'Something went wrong.');
  text = text.replace(/\b(?:session|task)[ _]id[ =:]+[\w.:-]+/gi, 'this session');
  text = text.replace(/\s*\((?:code|retcode)[ =:]*\d+\)/gi, '');
  return text;
}

/** A JSON parse error with its line and column ("line 3, column 7: Unexpected token"). */
export function jsonError(text, error) {
  const m = /position (\d+)/.exec(error.message);
  const at = m ? Number(m[1]) : null;
  if (at === null) {
    const lc = /line (\d+) column (\d+)/.exec(error.message);
    return lc ? `Not valid JSON at line ${lc[1]}, column ${lc[2]}.` : `Not valid JSON: ${error.message}`;
  }
  const before = text.slice(0, at).split('\n');
  return `Not valid JSON at line ${before.length}, column ${before.at(-1).length + 1}.`;
}

/** A time to come as "in 3 min" (the same units as relativeTime; a time just past is "now"). */
export function untilTime(value, now = Date.now()) {
  const when = toDate(value);
  if (!when) return '';
  const diff = Math.round((when.getTime() - now) / 1000);
  if (diff < 1) return 'now';
  if (diff < 60) return `in ${diff} s`;
  const units = [[60, 'min', 3600], [3600, 'h', 48 * 3600], [86400, 'd', Infinity]];
  for (const [size, name, limit] of units) {
    if (diff < limit) return `in ${Math.max(1, Math.round(diff / size))} ${name}`;
  }
  return '';
}

/** A time as the clock of a time zone shows it ("Mon 12 May, 09:00"), seconds when asked; the browser's
 * zone when `timeZone` is empty, UTC when the browser does not know it. */
export function clockText(value, timeZone, withSeconds = false) {
  const when = toDate(value);
  if (!when) return '';
  const options = { weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit',
    ...(withSeconds ? { second: '2-digit' } : {}), hourCycle: 'h23' };
  try {
    return new Intl.DateTimeFormat(undefined, { ...options, ...(timeZone ? { timeZone } : {}) }).format(when);
  } catch {
    return new Intl.DateTimeFormat(undefined, { ...options, timeZone: 'UTC' }).format(when);
  }
}
