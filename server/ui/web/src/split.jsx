// Two panes side by side with a divider between them that a pointer drags and the arrow keys move (a
// WAI-ARIA window splitter), the first pane's width kept in localStorage; the first pane can be hidden
// (kept mounted, so what it holds, a half-typed message say, stays). Narrow windows stack the panes.
import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import './split.css';

const STEP = 24;                // px per arrow key press; Shift moves four times as far
const MIN_FIRST = 260;          // the first pane (the chat) stays usable
const MIN_SECOND = 320;         // so does the second (the graph)

function stored(key) {
  try {
    const value = Number(localStorage.getItem(key));
    return Number.isFinite(value) && value > 0 ? value : null;
  } catch { return null; }
}

function store(key, value) {
  try { localStorage.setItem(key, String(Math.round(value))); } catch { /* private mode: not remembered */ }
}

/**
 * `first` and `second` side by side. `storageKey` names the remembered width of `first`;
 * `defaultShare` is its share of the width before the user moved the divider; `label` names the divider
 * for screen readers; `hidden` hides the first pane (the second takes the whole width).
 */
export function SplitPane({ first, second, storageKey, label, defaultShare = 0.3, hidden = false }) {
  const box = useRef(null);
  const [total, setTotal] = useState(0);
  const [width, setWidth] = useState(() => stored(storageKey));
  const drag = useRef(null);

  // measured before the first paint: the panes start at their width (a canvas fit to a wider first pane
  // would be cut once the width settles)
  useLayoutEffect(() => {
    if (box.current) setTotal(box.current.getBoundingClientRect().width);
  }, []);
  useEffect(() => {
    if (!box.current) return undefined;
    const observer = new ResizeObserver(([entry]) => setTotal(entry.contentRect.width));
    observer.observe(box.current);
    return () => observer.disconnect();
  }, []);

  const max = Math.max(MIN_FIRST, total - MIN_SECOND);
  const clamp = value => Math.min(max, Math.max(MIN_FIRST, value));
  const shown = clamp(width ?? Math.min(440, Math.max(300, total * defaultShare)));

  function move(value, remember = true) {
    const next = clamp(value);
    setWidth(next);
    if (remember) store(storageKey, next);
  }

  function onKeyDown(event) {
    const step = event.shiftKey ? STEP * 4 : STEP;
    const to = { ArrowLeft: shown - step, ArrowRight: shown + step, Home: MIN_FIRST, End: max }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    move(to);
  }

  function onPointerDown(event) {
    if (event.button !== 0) return;
    event.preventDefault();
    event.currentTarget.setPointerCapture(event.pointerId);
    drag.current = { x: event.clientX, width: shown };
  }
  function onPointerMove(event) {
    if (drag.current) move(drag.current.width + event.clientX - drag.current.x, false);
  }
  function onPointerUp(event) {
    if (!drag.current) return;
    move(drag.current.width + event.clientX - drag.current.x);
    drag.current = null;
  }

  return (
    <div ref={box} className={`split${hidden ? ' first-hidden' : ''}`}>
      <div className="split-first" style={{ width: `${shown}px` }} hidden={hidden}>{first}</div>
      {hidden ? null : (
        <div className="split-divider" role="separator" aria-orientation="vertical" aria-label={label} tabIndex={0}
          aria-valuenow={Math.round(shown)} aria-valuemin={MIN_FIRST} aria-valuemax={Math.round(max)}
          title="Drag, or use the arrow keys, to share the width" onKeyDown={onKeyDown}
          onPointerDown={onPointerDown} onPointerMove={onPointerMove} onPointerUp={onPointerUp} onPointerCancel={onPointerUp} />
      )}
      <div className="split-second">{second}</div>
    </div>
  );
}
