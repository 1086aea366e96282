// The agent's schedules on its run page (the routes of server/routes/schedules.py): each schedule with its
// cron expression in plain words, time zone, next run, last run (a link to its session), runs and last
// error; a form to create or edit one (presets or a cron expression, a time zone, the message and Begin's
// inputs with the run view's own fields), enable / disable, and delete (asks first; Escape keeps it).
// Every firing runs the agent in a new session, which the sessions list shows: the panel polls while a
// schedule is enabled and tells the page (`onRun`) when one ran.
import { useEffect, useId, useRef, useState } from 'react';
import { api } from './api.js';
import { notify } from './common.jsx';
import { PRESETS, describeCron, fieldsOf, normalCron, presetCron, presetOf } from './cron.js';
import { InputFields, fieldLabel, readInputs } from './forms.jsx';
import { clockText, plainError, relativeTime, route, toDate, untilTime } from './util.js';

const enc = encodeURIComponent;
const POLL_MS = 5000;           // the server's workers look for due schedules every 5 s
const FIELDS = ['cron', 'timezone', 'query', 'inputs', 'end_time', 'enabled'];

/** The browser's time zone (the form's default). */
export function browserZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch { return 'UTC'; }
}

/** Every IANA zone the browser knows, UTC first; `more` (the zone a schedule keeps) is always offered. */
function zoneNames(more) {
  let known = [];
  try { known = Intl.supportedValuesOf('timeZone'); } catch { known = []; }
  const rest = new Set([...known, browserZone(), more].filter(z => z && z !== 'UTC'));
  return ['UTC', ...[...rest].sort()];
}

/** The form field a server error names ("schedule: ..." is the cron expression), and the reason alone. */
export function errorOf(message) {
  const text = plainError(message);
  const found = /^(\w+):\s*(.+)$/s.exec(text);
  const field = found && (found[1] === 'schedule' ? 'cron' : found[1]);
  return FIELDS.includes(field) ? { field, text: found[2] } : { field: 'general', text };
}

/** A schedule's name in words: its cron expression read ("every day at 09:00"), or the expression. */
export function scheduleName(schedule) {
  return describeCron(schedule.cron) || schedule.cron;
}

const capital = text => text.charAt(0).toUpperCase() + text.slice(1);

const beginInputsOf = agent => {
  const inputs = (((((agent.dsl || {}).components || {}).begin || {}).obj || {}).params || {}).inputs;
  return inputs && typeof inputs === 'object' && Object.keys(inputs).length ? inputs : null;
};
const valueOf = v => (v && typeof v === 'object' && !Array.isArray(v) && 'value' in v ? v.value : v);
const isFile = field => String((field && field.type) || '').toLowerCase().includes('file');

/** Begin's inputs with a schedule's values as the fields' starting values. */
function withValues(inputs, values) {
  return Object.fromEntries(Object.entries(inputs).map(([key, field]) => [key,
    values && key in values && !isFile(field) ? { ...(field || {}), value: valueOf(values[key]) } : field]));
}

/** "2025-05-12T09:00", what a datetime-local field holds, for a time in milliseconds (the browser's clock). */
function localInput(ms) {
  const date = new Date(ms);
  return new Date(ms - date.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

function Problem({ id, text }) {
  return text ? <p className="field-error" id={id}>{text}</p> : null;
}

/** Create a schedule (`schedule` null) or edit one. `onDone(saved)` after the server took it. */
function ScheduleForm({ agent, schedule, beginInputs, onDone, onCancel }) {
  const id = `schedule-${useId().replace(/:/g, '')}`;
  const start = schedule ? presetOf(schedule.cron) : { preset: 'daily', minute: 0, time: '09:00' };
  const [preset, setPreset] = useState(start.preset);
  const [minute, setMinute] = useState(String(start.minute));
  const [time, setTime] = useState(start.time);
  const [cron, setCron] = useState(schedule ? schedule.cron : presetCron('daily', start));
  const [timezone, setTimezone] = useState(schedule ? schedule.timezone || 'UTC' : browserZone());
  const [query, setQuery] = useState(schedule ? schedule.query || '' : '');
  const [enabled, setEnabled] = useState(schedule ? schedule.enabled : true);
  const [endTime, setEndTime] = useState(schedule && schedule.end_time ? localInput(schedule.end_time) : '');
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const formRef = useRef(null);
  const beginRef = useRef(null);
  const first = useRef(null);
  const [zones] = useState(() => zoneNames(schedule && schedule.timezone));

  useEffect(() => { first.current.focus(); }, []);
  useEffect(() => {           // the first field the server named takes the focus
    const field = FIELDS.find(f => errors[f]);
    const box = field && formRef.current.querySelector(`[data-field="${field}"]`);
    const target = box && (box.matches('input, select, textarea') ? box : box.querySelector('input, select, textarea'));
    if (target) target.focus();
  }, [errors]);

  const clear = field => errors[field] && setErrors(e => ({ ...e, [field]: undefined }));
  const invalid = field => (errors[field] ? true : undefined);
  const describedBy = (field, ...more) => [errors[field] ? `${id}-${field}-error` : null, ...more].filter(Boolean).join(' ') || undefined;

  function pick(value) {
    setPreset(value);
    if (value !== 'custom') setCron(presetCron(value, { minute, time }));
    clear('cron');
  }
  function changeMinute(value) {
    setMinute(value);
    setCron(presetCron('hourly', { minute: value }));
    clear('cron');
  }
  function changeTime(value) {
    setTime(value);
    if (value) setCron(presetCron(preset, { time: value }));
    clear('cron');
  }

  async function submit(event) {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setErrors({});
    const body = { cron: normalCron(cron), timezone, query, enabled, end_time: endTime ? new Date(endTime).getTime() : null };
    try {
      if (beginInputs) {
        const answer = await readInputs(beginRef.current, beginInputs, agent.id);
        for (const [key, field] of Object.entries(beginInputs)) {     // no new file: the schedule keeps its own
          const kept = schedule && (schedule.inputs || {})[key];
          if (isFile(field) && !(answer[key].value || []).length && kept) answer[key] = kept;
        }
        body.inputs = answer;
      }
      const path = `/agents/${enc(agent.id)}/schedules${schedule ? `/${enc(schedule.id)}` : ''}`;
      const saved = await api(schedule ? 'PUT' : 'POST', path, body);
      onDone(saved, enabled && !saved.enabled);
    } catch (e) {
      const { field, text } = errorOf(e.message);
      setErrors({ [field]: text });
      setBusy(false);
    }
  }

  const reading = describeCron(cron);
  const seconds = fieldsOf(cron).length === 6;
  const title = schedule ? `Edit the schedule “${scheduleName(schedule)}”` : 'New schedule';
  return (
    <form ref={formRef} className="schedule-form" aria-labelledby={`${id}-title`} onSubmit={submit}>
      <h3 id={`${id}-title`}>{title}</h3>
      <fieldset>
        <legend>When it runs</legend>
        <div className="schedule-grid">
          <div>
            <label htmlFor={`${id}-preset`}>Repeat</label>
            <select ref={first} id={`${id}-preset`} value={preset} onChange={e => pick(e.target.value)}>
              {PRESETS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </div>
          {preset === 'hourly' ? (
            <div>
              <label htmlFor={`${id}-minute`}>At minute</label>
              <input id={`${id}-minute`} type="number" min={0} max={59} step={1} required value={minute}
                onChange={e => changeMinute(e.target.value)} />
            </div>
          ) : null}
          {preset === 'daily' || preset === 'weekdays' ? (
            <div>
              <label htmlFor={`${id}-time`}>At</label>
              <input id={`${id}-time`} type="time" required value={time} onChange={e => changeTime(e.target.value)} />
            </div>
          ) : null}
          <div data-field="timezone">
            <label htmlFor={`${id}-timezone`}>Time zone</label>
            <select id={`${id}-timezone`} value={timezone} aria-invalid={invalid('timezone')} aria-describedby={describedBy('timezone')}
              onChange={e => { setTimezone(e.target.value); clear('timezone'); }}>
              {zones.map(z => <option key={z} value={z}>{z === browserZone() ? `${z} (this browser)` : z}</option>)}
            </select>
            <Problem id={`${id}-timezone-error`} text={errors.timezone} />
          </div>
        </div>
        <div data-field="cron">
          <label htmlFor={`${id}-cron`}>Cron expression</label>
          <input id={`${id}-cron`} className="cron-input" type="text" required spellCheck="false" autoComplete="off" value={cron}
            aria-invalid={invalid('cron')} aria-describedby={describedBy('cron', `${id}-cron-reading`, `${id}-cron-help`)}
            onChange={e => { setCron(e.target.value); setPreset('custom'); clear('cron'); }} />
          <Problem id={`${id}-cron-error`} text={errors.cron} />
          <p className="cron-reading" id={`${id}-cron-reading`}>
            {reading ? <>Runs <strong>{reading}</strong>{seconds || !timezone ? '' : ` (${timezone} time)`}.</>
              : <span className="muted">A custom expression: the server checks it when you save.</span>}
          </p>
          <p className="muted hint" id={`${id}-cron-help`}>Five fields: minute, hour, day of the month, month, day of
            the week (<code>0 9 * * 1-5</code> is 09:00 on weekdays); a sixth, last, is seconds.</p>
        </div>
      </fieldset>
      <div data-field="query">
        <label htmlFor={`${id}-query`}>Message <span className="muted">(optional: what each run asks, sys.query)</span></label>
        <textarea id={`${id}-query`} rows={2} value={query} aria-invalid={invalid('query')} aria-describedby={describedBy('query')}
          onChange={e => { setQuery(e.target.value); clear('query'); }} />
        <Problem id={`${id}-query-error`} text={errors.query} />
      </div>
      {beginInputs ? (
        <fieldset ref={beginRef} className="begin-inputs" data-field="inputs" aria-describedby={describedBy('inputs')}>
          <legend>Begin's inputs</legend>
          <InputFields inputs={withValues(beginInputs, schedule && schedule.inputs)} idPrefix={`${id}-input`} disabled={busy} />
          {Object.entries(beginInputs).filter(([key, f]) => isFile(f) && schedule && (schedule.inputs || {})[key]).map(([key, f]) => (
            <p key={key} className="muted hint">{fieldLabel(key, f)}: the files chosen before stay unless you pick others.</p>
          ))}
          <Problem id={`${id}-inputs-error`} text={errors.inputs} />
        </fieldset>
      ) : null}
      <div className="schedule-grid">
        <div data-field="end_time">
          <label htmlFor={`${id}-end`}>Ends <span className="muted">(optional, your clock)</span></label>
          <input id={`${id}-end`} type="datetime-local" value={endTime} aria-invalid={invalid('end_time')}
            aria-describedby={describedBy('end_time')} onChange={e => { setEndTime(e.target.value); clear('end_time'); }} />
          <Problem id={`${id}-end_time-error`} text={errors.end_time} />
        </div>
        <div data-field="enabled" className="field-boolean">
          <input id={`${id}-enabled`} type="checkbox" checked={enabled} aria-invalid={invalid('enabled')}
            aria-describedby={describedBy('enabled')} onChange={e => { setEnabled(e.target.checked); clear('enabled'); }} />
          <label htmlFor={`${id}-enabled`}>Enabled</label>
          <Problem id={`${id}-enabled-error`} text={errors.enabled} />
        </div>
      </div>
      <div className="buttons">
        <button type="submit" className="primary" disabled={busy}>{schedule ? 'Save changes' : 'Create schedule'}</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </div>
      <p className="error" role="alert">{errors.general || ''}</p>
    </form>
  );
}

/** What a schedule asks: its message and Begin's values, with the fields' labels. */
function Asks({ schedule, beginInputs }) {
  const inputs = Object.entries(schedule.inputs || {});
  return (<>
    {schedule.query ? <div className="schedule-query">“{schedule.query}”</div> : <div className="muted">(no message)</div>}
    {inputs.length ? (
      <ul className="schedule-inputs">{inputs.map(([key, v]) => {
        const value = valueOf(v);
        const text = Array.isArray(value) ? value.map(f => (f && (f.name || f.id)) || String(f)).join(', ') : String(value ?? '');
        return <li key={key}><span className="muted">{fieldLabel(key, (beginInputs || {})[key])}:</span> {text}</li>;
      })}</ul>
    ) : null}
  </>);
}

function NextRun({ schedule: s }) {
  if (!s.enabled || !s.next_run_time) {
    const ended = s.end_time && s.end_time <= Date.now();
    return <span className="muted">{ended ? 'none: it ended' : 'none: disabled'}</span>;
  }
  const when = toDate(s.next_run_time);
  return (<>
    <time dateTime={when.toISOString()} title={`${clockText(when, '', true)} on this browser's clock`}>
      {clockText(when, s.timezone || 'UTC', fieldsOf(s.cron).length === 6)}</time>
    <span className="muted"> · {untilTime(when)}</span>
  </>);
}

function LastRun({ schedule: s, agentId }) {
  if (!s.last_run_time) return <span className="muted">never</span>;
  const when = toDate(s.last_run_time);
  return (<>
    <time dateTime={when.toISOString()} title={clockText(when, '', true)}>{relativeTime(when)}</time>
    {s.last_session_id ? <>{' · '}<a className="last-session" href={route('agents', agentId, 'sessions', s.last_session_id)}>
      Open its session</a></> : null}
  </>);
}

/** A cell that names its column when a narrow window stacks the row (style.css: `td[data-label]::before`). */
const Cell = ({ label, children, className }) => <td className={className} data-label={label}><div>{children}</div></td>;

function ScheduleRow({ schedule: s, agentId, beginInputs, editing, onEdit, onChanged }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const deleteButton = useRef(null);
  const asked = useRef(false);
  const name = scheduleName(s);
  const path = `/agents/${enc(agentId)}/schedules/${enc(s.id)}`;
  useEffect(() => {           // "Keep" or Escape: the focus goes back to Delete
    if (!asking && asked.current && deleteButton.current) deleteButton.current.focus();
    asked.current = asking;
  }, [asking]);

  async function toggle() {
    setBusy(true);
    try {
      const saved = await api('PUT', path, { enabled: !s.enabled });
      if (!s.enabled && !saved.enabled) notify('This schedule has ended: change its end time to enable it again.', 'error');
      else notify(saved.enabled ? `Schedule “${name}” enabled.` : `Schedule “${name}” disabled: it will not run until enabled.`);
      await onChanged();
    } catch (e) { notify(e.message, 'error'); }
    setBusy(false);
  }
  async function remove() {
    try {
      await api('DELETE', path);
      notify(`Schedule “${name}” deleted (the sessions it ran stay).`);
      asked.current = false;
      await onChanged({ deleted: s.id });
    } catch (e) { notify(e.message, 'error'); }
  }

  return (
    <tr data-schedule-id={s.id} className={s.enabled ? 'enabled' : 'disabled'} aria-current={editing ? 'true' : undefined}>
      <Cell label="Schedule">
        <div className="schedule-reading">{capital(describeCron(s.cron) || 'custom')}</div>
        <code className="schedule-cron">{s.cron}</code>
        {s.enabled ? null : <span className="tag">Disabled</span>}
        {s.end_time ? <div className="muted hint">until {clockText(s.end_time, '')}</div> : null}
      </Cell>
      <Cell label="Time zone" className="schedule-zone">{s.timezone || 'UTC'}</Cell>
      <Cell label="Asks"><Asks schedule={s} beginInputs={beginInputs} /></Cell>
      <Cell label="Next run" className="next-run"><NextRun schedule={s} /></Cell>
      <Cell label="Last run" className="last-run">
        <LastRun schedule={s} agentId={agentId} />
        {s.last_error ? <p className="error last-error">{plainError(s.last_error)}</p> : null}
      </Cell>
      <Cell label="Runs" className="runs">{s.runs}</Cell>
      <td className="schedule-actions">
        <div className="row-actions">
          {asking ? (
            <span className="confirm" role="group" aria-label={`Delete the schedule “${name}”?`}
              onKeyDown={e => { if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); setAsking(false); } }}>
              Delete it? Its sessions stay.
              <button type="button" className="danger" onClick={remove}>Yes, delete</button>
              <button type="button" autoFocus onClick={() => setAsking(false)}>Keep</button>
            </span>
          ) : (<>
            <button type="button" disabled={busy} onClick={toggle} aria-label={`${s.enabled ? 'Disable' : 'Enable'} the schedule “${name}”`}>
              {s.enabled ? 'Disable' : 'Enable'}</button>
            <button type="button" className="edit-schedule" onClick={() => onEdit(s.id)} aria-label={`Edit the schedule “${name}”`}>Edit</button>
            <button ref={deleteButton} type="button" className="danger" onClick={() => setAsking(true)}
              aria-label={`Delete the schedule “${name}”`}>Delete</button>
          </>)}
        </div>
      </td>
    </tr>
  );
}

/** The agent's schedules, and the form to make or change one. */
export function SchedulesPanel({ agent, onRun }) {
  const [schedules, setSchedules] = useState(null);
  const [loadError, setLoadError] = useState('');
  const [editing, setEditing] = useState(null);         // null, 'new', or the id of the schedule being edited
  const seen = useRef(null);                            // each schedule's runs and last session, to hear of a new run
  const newButton = useRef(null);
  const panel = useRef(null);
  const beginInputs = beginInputsOf(agent);
  const onRunRef = useRef(onRun);
  onRunRef.current = onRun;

  async function load() {
    try {
      const list = await api('GET', `/agents/${enc(agent.id)}/schedules`);
      const marks = Object.fromEntries(list.map(s => [s.id, `${s.runs}/${s.last_session_id || ''}`]));
      if (seen.current && list.some(s => seen.current[s.id] !== undefined && seen.current[s.id] !== marks[s.id])
          && onRunRef.current) onRunRef.current();
      seen.current = marks;
      setSchedules(list);
      setLoadError('');
    } catch (e) {
      setLoadError(plainError(e.message));
      setSchedules(s => s || []);
    }
  }
  useEffect(() => { load(); }, [agent.id]);              // eslint-disable-line react-hooks/exhaustive-deps
  const polling = (schedules || []).some(s => s.enabled);
  useEffect(() => {
    if (!polling) return undefined;
    const timer = setInterval(() => { if (document.visibilityState !== 'hidden') load(); }, POLL_MS);
    return () => clearInterval(timer);
  }, [polling, agent.id]);                              // eslint-disable-line react-hooks/exhaustive-deps

  function closeForm(focusId) {
    setEditing(null);
    setTimeout(() => {                                   // back where the form was opened from
      const row = focusId && panel.current && panel.current.querySelector(`tr[data-schedule-id="${CSS.escape(focusId)}"] .edit-schedule`);
      (row || newButton.current || panel.current)?.focus();
    }, 0);
  }
  async function saved(schedule, ended) {
    const name = scheduleName(schedule);
    if (ended) notify(`Schedule “${name}” saved, but disabled: its end time comes before its next run.`, 'error');
    else notify(editing === 'new' ? `Schedule “${name}” created.` : `Schedule “${name}” saved.`);
    const edited = editing === 'new' ? null : schedule.id;
    await load();
    closeForm(edited);
  }
  async function changed({ deleted } = {}) {
    if (deleted && editing === deleted) setEditing(null);
    await load();
    if (deleted) setTimeout(() => newButton.current && newButton.current.focus(), 0);
  }

  const current = editing && editing !== 'new' ? (schedules || []).find(s => s.id === editing) : null;
  return (
    <section ref={panel} className="card schedules" aria-labelledby="schedules-title" tabIndex={-1}>
      <div className="section-head">
        <h2 id="schedules-title">Schedules</h2>
        {editing === 'new' ? null : <button ref={newButton} type="button" onClick={() => setEditing('new')}>New schedule</button>}
      </div>
      <p className="muted intro">The agent runs by itself at the times a schedule names, each run in a new session listed with
        the sessions.</p>
      {loadError ? <p className="error" role="alert">Cannot read the schedules: {loadError}</p> : null}
      {schedules === null ? <p className="muted">Loading…</p> : null}
      {schedules && !schedules.length && !loadError ? <p className="muted">No schedules: the agent runs only when asked.</p> : null}
      {schedules && schedules.length ? (
        <table className="schedules-table">
          <caption className="visually-hidden">The agent's schedules</caption>
          <thead><tr><th scope="col">Schedule</th><th scope="col">Time zone</th><th scope="col">Asks</th><th scope="col">Next run</th>
            <th scope="col">Last run</th><th scope="col">Runs</th><th scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
          <tbody>{schedules.map(s => (
            <ScheduleRow key={s.id} schedule={s} agentId={agent.id} beginInputs={beginInputs} editing={editing === s.id}
              onEdit={setEditing} onChanged={changed} />
          ))}</tbody>
        </table>
      ) : null}
      {editing === 'new' || current ? (
        <ScheduleForm key={editing} agent={agent} schedule={current} beginInputs={beginInputs} onDone={saved}
          onCancel={() => closeForm(current && current.id)} />
      ) : null}
    </section>
  );
}
