// Cron expressions as the schedule form builds them (its presets) and as people read them ("every day at
// 09:00"). The server (croniter) is the judge of what is valid: an expression read here as nothing is
// "custom", not wrong. Five fields (minute hour day-of-month month day-of-week), and an optional sixth for
// seconds, as server/backend/schedules.py takes them.

const DAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const DAY_KEYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** The presets of the form, in the order it offers them. */
export const PRESETS = [
  ['hourly', 'Every hour'],
  ['daily', 'Every day'],
  ['weekdays', 'On weekdays (Mon–Fri)'],
  ['custom', 'Custom cron expression'],
];

export const fieldsOf = expression => String(expression || '').trim().split(/\s+/).filter(Boolean);
export const normalCron = expression => fieldsOf(expression).join(' ');

const pad = n => String(n).padStart(2, '0');
const clockTime = (hour, minute) => `${pad(hour)}:${pad(minute)}`;

/** A whole number within [lo, hi] written in a cron field, else null. */
function number(text, lo, hi) {
  if (!/^\d{1,2}$/.test(text)) return null;
  const n = Number(text);
  return n >= lo && n <= hi ? n : null;
}

function day(text) {
  const named = DAY_KEYS.indexOf(text.toLowerCase());
  if (named >= 0) return named;
  const n = number(text, 0, 7);
  return n === null ? null : n % 7;
}

/** The days of week a field names (numbers, names, ranges, lists), sorted; null when it says more. */
function daysOf(field) {
  const days = new Set();
  for (const part of field.split(',')) {
    const [from, to, extra] = part.split('-');
    if (extra !== undefined) return null;
    const a = day(from);
    const b = to === undefined ? a : day(to);
    if (a === null || b === null) return null;
    // 1-7 ends on Sunday (7): walk the week from a to b
    const end = to !== undefined && number(to, 7, 7) === 7 ? 7 : b;
    if (end < a) return null;
    for (let d = a; d <= end; d += 1) days.add(d % 7);
  }
  return [...days].sort((x, y) => x - y);
}

function listText(items) {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' }[n % 10] || 'th');
  return `${n}${suffix}`;
}

/** What a cron expression means in plain words ("every day at 09:00"), or null when it is not a simple one. */
export function describeCron(expression) {
  let fields = fieldsOf(expression);
  if (fields.length !== 5 && fields.length !== 6) return null;
  if (fields.length === 6) {
    const seconds = fields[5];
    fields = fields.slice(0, 5);
    if (seconds !== '0') {
      if (fields.some(f => f !== '*')) return null;
      if (seconds === '*') return 'every second';
      const step = /^\*\/(\d+)$/.exec(seconds);
      return step && Number(step[1]) > 0 ? `every ${Number(step[1])} seconds` : null;
    }
  }
  const [minute, hour, dom, month, dow] = fields;
  if (month !== '*') return null;
  if (dom === '*' && dow === '*' && hour === '*') {
    if (minute === '*') return 'every minute';
    const step = /^\*\/(\d+)$/.exec(minute);
    if (step && Number(step[1]) > 0) return `every ${Number(step[1])} minutes`;
  }
  const m = number(minute, 0, 59);
  if (m === null) return null;
  if (hour === '*' && dom === '*' && dow === '*') return m === 0 ? 'every hour, on the hour' : `every hour at ${m} min past`;
  const hours = hour.split(',').map(h => number(h, 0, 23));
  if (hours.includes(null)) return null;
  const at = `at ${listText(hours.map(h => clockTime(h, m)))}`;
  if (dom === '*' && dow === '*') return `every day ${at}`;
  if (dom === '*') {
    const days = daysOf(dow);
    if (!days) return null;
    const key = days.join(',');
    if (key === '0,1,2,3,4,5,6') return `every day ${at}`;
    if (key === '1,2,3,4,5') return `weekdays ${at}`;
    if (key === '0,6') return `weekends ${at}`;
    return `every ${listText(days.map(d => DAY_NAMES[d]))} ${at}`;
  }
  const date = number(dom, 1, 31);
  if (dow === '*' && date !== null) return `on the ${ordinal(date)} of every month ${at}`;
  return null;
}

/** The form's preset for an expression: {preset, minute, time} (custom when it is none of them). */
export function presetOf(expression) {
  const text = normalCron(expression);
  let found = /^(\d{1,2}) \* \* \* \*$/.exec(text);
  if (found && number(found[1], 0, 59) !== null) return { preset: 'hourly', minute: Number(found[1]), time: '09:00' };
  found = /^(\d{1,2}) (\d{1,2}) \* \* (\*|1-5)$/.exec(text);
  if (found && number(found[1], 0, 59) !== null && number(found[2], 0, 23) !== null) {
    return { preset: found[3] === '*' ? 'daily' : 'weekdays', minute: 0,
      time: clockTime(Number(found[2]), Number(found[1])) };
  }
  return { preset: 'custom', minute: 0, time: '09:00' };
}

/** The expression of a preset: at `minute` past every hour, or at `time` ("HH:MM") every day or weekday. */
export function presetCron(preset, { minute = 0, time = '09:00' } = {}) {
  const [h, m] = String(time || '09:00').split(':').map(Number);
  const hour = Number.isFinite(h) ? h : 9;
  const min = Number.isFinite(m) ? m : 0;
  if (preset === 'hourly') return `${Math.min(59, Math.max(0, Number(minute) || 0))} * * * *`;
  if (preset === 'daily') return `${min} ${hour} * * *`;
  if (preset === 'weekdays') return `${min} ${hour} * * 1-5`;
  return null;
}
