// The model of an LLM, Agent or Categorize chosen from what this server can run (GET /api/v1/models:
// its default model, the scripted one under --llm-script, the models the tenant's agents name, and each
// provider as `<model>@Provider`), still taking any `model@Factory` typed in; empty means the server's
// default. And the sampling values RAGFlow's canvas shows beside it, each with its switch: the engine
// sends a value only while its switch (`temperatureEnabled`, `topPEnabled`...) is on.
import { useEffect, useState } from 'react';
import { api } from './api.js';

let asked = null;           // one request per page: the list changes only when the server restarts or agents are saved
function useModels() {
  const [models, setModels] = useState(null);
  useEffect(() => {
    let live = true;
    asked = asked || api('GET', '/models').catch(e => { asked = null; return { error: e.message }; });
    asked.then(m => { if (live) setModels(m); });
    return () => { live = false; };
  }, []);
  return models;
}

const SOURCES = { default: "the server's default", script: 'the script answers it', agents: 'used by your agents' };

export function ModelField({ id, value, onChange, invalid, describedBy, label }) {
  const models = useModels();
  const listId = `${id}-models`;
  const known = (models && models.models) || [];
  const providers = (models && models.providers) || [];
  const current = typeof value === 'string' ? value : '';
  const factory = current.includes('@') ? current.slice(current.lastIndexOf('@') + 1) : '';
  const provider = factory && providers.find(p => p.name.toLowerCase() === factory.toLowerCase());
  let hint = null;
  if (!current) hint = models && models.default_llm ? `Empty: runs with the server's default, ${models.default_llm}.` : 'Empty: choose a model (model@Factory).';
  else if (models && models.scripted) hint = null;            // the script answers every model: no provider or key is needed
  else if (models && factory && !provider) hint = `This server knows no provider "${factory}".`;
  else if (provider && provider.key_required && !provider.has_key) hint = `${provider.name} has no API key on this server (${provider.key_env}).`;
  return (
    <>
      <input id={id} type="text" list={listId} value={current} placeholder="model@Factory, e.g. gpt-4o@OpenAI" autoComplete="off"
        aria-invalid={invalid || undefined} aria-describedby={[describedBy, hint ? `${id}-hint` : null].filter(Boolean).join(' ') || undefined}
        aria-label={label} onChange={e => onChange(e.target.value.trim() === '' ? '' : e.target.value)} />
      <datalist id={listId}>
        {known.map(m => <option key={m.llm_id} value={m.llm_id} label={SOURCES[m.source] || m.source} />)}
        {providers.filter(p => p.has_key || !p.key_required).map(p => <option key={`p-${p.name}`} value={`@${p.name}`} label={`${p.name}: type the model before @`} />)}
      </datalist>
      {hint ? <p id={`${id}-hint`} className="muted model-hint">{hint}</p> : null}
      {models && models.error ? <p className="muted model-hint">The server's models could not be listed: {models.error}</p> : null}
    </>
  );
}

// the sampling fields and the switch RAGFlow saves beside each (nodes/llm.py ENABLED_FLAG)
export const SAMPLING = [
  ['temperature', 'temperatureEnabled', 'Temperature', 0, 1, 0.01],
  ['top_p', 'topPEnabled', 'Top p', 0, 1, 0.01],
  ['presence_penalty', 'presencePenaltyEnabled', 'Presence penalty', 0, 1, 0.01],
  ['frequency_penalty', 'frequencyPenaltyEnabled', 'Frequency penalty', 0, 1, 0.01],
  ['max_tokens', 'maxTokensEnabled', 'Most tokens', 0, 128000, 1],
];
export const SAMPLING_FIELDS = new Set(SAMPLING.flatMap(([name, flag]) => [name, flag]));

// a value the engine would not send even with its switch on (SPEC 3.3: temperature >= 0, the others > 0)
const unset = (name, v) => (name === 'temperature' ? typeof v !== 'number' : !(typeof v === 'number' && v > 0));

/** The sampling values with their switches; a value whose switch is off is kept but not sent. A switch
 * turned on over a value the DSL lacks (or a 0 the engine would not send) starts from `initial` (RAGFlow's). */
export function SamplingField({ params, onChange, prefix, initial = {} }) {
  return (
    <fieldset className="rows-field sampling-field" data-field="params.temperature">
      <legend>Sampling</legend>
      <p className="muted help">A value is sent to the model only while its switch is on.</p>
      {SAMPLING.map(([name, flag, label, min, max, step]) => {
        const id = `${prefix}-${name}`;
        const on = Boolean(params[flag]);
        const v = typeof params[name] === 'number' ? params[name] : 0;
        return (
          <div key={name} className="sampling-row">
            <input id={`${id}-on`} type="checkbox" checked={on} aria-label={`Send ${label.toLowerCase()}`}
              onChange={e => onChange({ ...params, [flag]: e.target.checked,
                ...(e.target.checked && unset(name, params[name]) && initial[name] !== undefined ? { [name]: initial[name] } : {}) })} />
            <label htmlFor={id}>{label} <code className="key">{name}</code></label>
            <input id={id} type="number" min={min} max={max} step={step} value={v} disabled={!on}
              onChange={e => onChange({ ...params, [name]: e.target.value === '' ? 0 : Number(e.target.value) })} />
          </div>
        );
      })}
    </fieldset>
  );
}
