// One turn's stream applied to a conversation and a canvas: used by the run page and by forks.
import { useReducer, useRef, useState } from 'react';
import { flushSync } from 'react-dom';
import { stream } from './api.js';
import { chatReducer, turnMeta } from './chat.jsx';
import { applyRunEvent, CANCELLED, finishTurn } from './runstate.js';

/**
 * The conversation items, the components' states and a `play(path, body, hooks)` that streams a turn into
 * both. Every event is drawn as it arrives (flushSync), so a state that lasts a moment is still shown.
 * hooks: onSession(id), onForm(data), keepStates (a fork: the states set before it stay). Resolves to {cancelled, failed, paused, answered}.
 */
export function useTurn(dsl) {
  const [items, dispatch] = useReducer(chatReducer, []);
  const [states, setStates] = useState({});
  const [running, setRunning] = useState(false);
  const controller = useRef(null);
  const dslRef = useRef(dsl);
  dslRef.current = dsl;

  async function play(path, body, hooks = {}) {
    if (controller.current) return null;
    controller.current = new AbortController();
    setRunning(true);
    const outcome = { cancelled: false, failed: false, paused: false, answered: false };
    try {
      await stream(path, body, event => {
        const data = event.data || {};
        if (event.session_id && hooks.onSession) hooks.onSession(event.session_id);
        if (event.event === 'user_inputs') outcome.paused = true;
        if (event.event === 'message_end') outcome.answered = true;
        if ((event.event === 'node_finished' && data.error) || (!event.event && event.code)) outcome.failed = true;
        const cancelled = event.event === 'workflow_finished' && data.outputs === CANCELLED;
        if (cancelled) outcome.cancelled = true;
        flushSync(() => {
          // a fork keeps the steps before its fork point as they were (its run starts from there)
          if (!(hooks.keepStates && event.event === 'workflow_started')) setStates(s => applyRunEvent(s, event, dslRef.current));
          dispatch({ type: 'event', event });
          if (cancelled) {
            dispatch({ type: 'notice', level: 'warning', text: outcome.answered
              ? 'The turn was cancelled after its answer had finished.'
              : 'The turn was cancelled before its answer finished.' });
          } else if (event.event === 'workflow_finished') {
            const meta = turnMeta(data);
            if (meta) dispatch({ type: 'turn-meta', text: meta });
          }
        });
        if (event.event === 'user_inputs' && hooks.onForm) hooks.onForm(data);
      }, controller.current.signal);
    } finally {
      controller.current = null;
      setRunning(false);
      setStates(s => finishTurn(s, dslRef.current, outcome));
    }
    return outcome;
  }

  return { items, dispatch, states, setStates, running, play, abort: () => controller.current && controller.current.abort() };
}
