// The params form's memory fields (paramsform.jsx): a Message's "Save to memory" and a Retrieval's source
// (datasets or memories) with the memories it searches. Memories are picked by name from the tenant's list
// (GET /memories); the DSL keeps their ids (`memory_ids`), and an id that names no memory of this tenant stays
// listed, ticked, until it is unticked. `user_id` (a literal or a {variable}) keeps or reads one user's memories.
import { useEffect, useState } from 'react';
import { api } from './api.js';
import { plainError } from './util.js';

/** `memory_ids` as a list, whatever the DSL holds (RAGFlow's validator takes one id as a string too). */
const idsOf = value => (Array.isArray(value) ? value.map(String) : value ? [String(value)] : []);

/** Where a Retrieval searches, as RetrievalParams.source() decides: its `retrieval_from` when set, else its
 * datasets when it names some, else its memories when it names some, else datasets. */
export function sourceOf(params) {
  const p = params || {};
  if (p.retrieval_from === 'dataset' || p.retrieval_from === 'memory') return p.retrieval_from;
  const datasets = idsOf(p.dataset_ids).length || idsOf(p.kb_ids).length;
  return datasets ? 'dataset' : idsOf(p.memory_ids).length ? 'memory' : 'dataset';
}

/** The fields only a search over datasets uses (left aside while a Retrieval searches memories). */
export const DATASET_ONLY = ['dataset_ids', 'kb_ids', 'top_k', 'rerank_id', 'cross_languages', 'toc_enhance', 'use_kg', 'meta_data_filter'];

function useMemories() {
  const [state, setState] = useState({ list: null, error: '' });
  useEffect(() => {
    let live = true;
    api('GET', '/memories?page_size=100')
      .then(data => live && setState({ list: data.memory_list || [], error: '' }))
      .catch(e => live && setState({ list: [], error: plainError(e.message) }));
    return () => { live = false; };
  }, []);
  return state;
}

function Problems({ id, problems }) {
  if (!problems.length) return null;
  return <ul id={id} className="field-problems">{problems.map((p, i) => <li key={i} className={`severity-${p.severity}`}>{p.message}</li>)}</ul>;
}

const about = (problems, name) => problems.filter(p => p.field === `params.${name}` || (p.field || '').startsWith(`params.${name}.`));

/**
 * The memories to save to (`saves`: a Message) or to search (a Retrieval), by name, and the user id.
 * `ids` and `userId` are the params' values; `onIds` and `onUserId` change them.
 */
export function MemoryField({ saves, ids, userId, onIds, onUserId, problems, prefix }) {
  const { list, error } = useMemories();
  const chosen = idsOf(ids);
  const known = new Set((list || []).map(m => m.id));
  const missing = list ? chosen.filter(id => !known.has(id)) : [];
  const id = `${prefix}-memory`;
  const idProblems = about(problems, 'memory_ids');
  const userProblems = about(problems, 'user_id');
  const pick = (memoryId, on) => {
    const next = on ? [...chosen, memoryId] : chosen.filter(x => x !== memoryId);
    onIds([...new Set(next)]);
  };
  const legend = saves ? 'Save to memory' : 'Memories to search';
  return (
    <fieldset className={`memory-field${idProblems.length || userProblems.length ? ' has-problem' : ''}`} data-field="params.memory_ids"
      aria-describedby={[`${id}-help`, idProblems.length ? `${id}-problems` : null].filter(Boolean).join(' ')}>
      <legend>{legend} <code className="key">memory_ids</code></legend>
      <p id={`${id}-help`} className="muted help">{saves
        ? 'Each exchange (the question and this answer) is saved to the memories ticked here, after the answer is shown.'
        : 'The messages of these memories closest to the query, best first.'}</p>
      {list === null ? <p className="muted">Loading the memories…</p> : null}
      {error ? <p className="error">Cannot list the memories: {error}</p> : null}
      {list && !list.length && !missing.length && !error
        ? <p className="muted">No memories yet: <a href="#/memories">create one on the Memories page</a>.</p> : null}
      {list && (list.length || missing.length) ? (
        <ul className="memory-choices">
          {list.map(m => (
            <li key={m.id} className="field-boolean">
              <input id={`${id}-${m.id}`} type="checkbox" checked={chosen.includes(m.id)} onChange={e => pick(m.id, e.target.checked)} />
              <label htmlFor={`${id}-${m.id}`}>{m.name}</label>
              <span className="muted hint">{(m.memory_type || []).join(', ')}</span>
            </li>
          ))}
          {missing.map(x => (
            <li key={x} className="field-boolean missing-memory">
              <input id={`${id}-missing-${x}`} type="checkbox" checked onChange={() => pick(x, false)} />
              <label htmlFor={`${id}-missing-${x}`}><code>{x}</code></label>
              <span className="error hint">no such memory: untick it</span>
            </li>
          ))}
        </ul>
      ) : null}
      <Problems id={`${id}-problems`} problems={idProblems} />
      <div className="param-field" data-field="params.user_id">
        <label htmlFor={`${id}-user`}>{saves ? 'User id' : 'Only this user'} <span className="muted">(optional)</span> <code className="key">user_id</code></label>
        <input id={`${id}-user`} type="text" spellCheck="false" autoComplete="off" value={userId || ''} placeholder="{sys.user_id}"
          aria-invalid={userProblems.length ? true : undefined}
          aria-describedby={[`${id}-user-help`, userProblems.length ? `${id}-user-problems` : null].filter(Boolean).join(' ')}
          onChange={e => onUserId(e.target.value)} />
        <p id={`${id}-user-help`} className="muted help">{saves
          ? 'Whose memory this is: a name or a {variable}; empty, the caller\'s user id.'
          : 'Only the memories of this user: a name or a {variable}; empty, everyone\'s.'}</p>
        <Problems id={`${id}-user-problems`} problems={userProblems} />
      </div>
    </fieldset>
  );
}

/** A Retrieval's source: datasets or memories (`retrieval_from`). */
export function SourceField({ params, onChange, problems, prefix }) {
  const id = `${prefix}-source`;
  const value = (params || {}).retrieval_from;
  const source = sourceOf(params);
  const mine = about(problems, 'retrieval_from');
  return (
    <fieldset className={`source-field${mine.length ? ' has-problem' : ''}`} data-field="params.retrieval_from">
      <legend>Search in <code className="key">retrieval_from</code></legend>
      <div className="choices">
        {[['dataset', 'Datasets'], ['memory', 'Memories']].map(([v, label]) => (
          <span key={v} className="field-boolean">
            <input id={`${id}-${v}`} type="radio" name={`${id}`} value={v} checked={source === v} onChange={() => onChange(v)} />
            <label htmlFor={`${id}-${v}`}>{label}</label>
          </span>
        ))}
      </div>
      {value !== 'dataset' && value !== 'memory'
        ? <p className="muted help">Not set in the DSL: a Retrieval searches its datasets, or its memories when it names no dataset.</p> : null}
      <Problems id={`${id}-problems`} problems={mine} />
    </fieldset>
  );
}
