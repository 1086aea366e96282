// Where the run canvas looks: the whole graph when it fits at a zoom its text reads at, else a readable
// zoom centred on the running component or the start (a 21-component agent fit whole in a 800 px column
// drew its names at 4 px), and the camera follows a turn to each component that starts off screen.
// A child of <ReactFlow> (it uses React Flow's store).
import { useEffect, useRef } from 'react';
import { useReactFlow, useStore, useStoreApi } from '@xyflow/react';

/** The zoom below which a box's text no longer reads: its name (13 px) is then under ~11.7 px on screen. */
export const READABLE_ZOOM = 0.9;
const PAD = 24;             // px between the view's edge and the graph's
const FIT_PADDING = 0.12;   // as canvas.jsx's FIT

/** `x` (or `y`) of a view at `zoom` that shows `focus` (a graph coordinate, centred when it can) and leaves
 * no empty band beyond the graph's `low`..`high` where the graph is larger than the view (`size` px). */
function placed(focus, low, high, size, zoom) {
  const span = (high - low) * zoom;
  if (span <= size - 2 * PAD) return (size - span) / 2 - low * zoom;         // fits this way: centred
  const centred = size / 2 - focus * zoom;
  return Math.min(PAD - low * zoom, Math.max(size - PAD - high * zoom, centred));
}

/**
 * `ids`: the components (the fit and the bounds leave notes out); `focus()`: the id to look at first
 * (the running component, else the start); `running`: the id of a component that started, followed when
 * off screen; `selected`: the component whose step the drawer shows, kept in view beside it; `signature`: a
 * change fits the view again (full screen, another graph).
 */
export function ReadableView({ ids, focus, running, selected = null, signature }) {
  const flow = useReactFlow();
  const width = useStore(s => s.width);
  const height = useStore(s => s.height);
  const count = useStore(s => s.nodeLookup.size);
  const ready = width > 0 && height > 0 && count > 0;
  const idsRef = useRef(ids);
  idsRef.current = ids;
  const store = useStoreApi();
  // a new signature asks for a new view, placed once the canvas has its size (full screen resizes it a
  // moment later); after that a resize (the split's divider) keeps the user's view
  const pending = useRef(true);
  const seen = useRef(signature);
  if (seen.current !== signature) { seen.current = signature; pending.current = true; }

  useEffect(() => {
    if (!ready || !pending.current) return undefined;
    const timer = setTimeout(() => {
      pending.current = false;
      const { width: w, height: h } = store.getState();
      const shown = idsRef.current.filter(id => flow.getInternalNode(id));
      if (!shown.length || !w || !h) return;
      const all = flow.getNodesBounds(shown);
      const fitZoom = Math.min(1, w / (all.width * (1 + 2 * FIT_PADDING)), h / (all.height * (1 + 2 * FIT_PADDING)));
      if (fitZoom >= READABLE_ZOOM) {
        flow.fitView({ padding: FIT_PADDING, maxZoom: 1, nodes: shown.map(id => ({ id })), duration: 0 });
        return;
      }
      const target = flow.getInternalNode(focus()) ? flow.getNodesBounds([focus()]) : all;
      const zoom = READABLE_ZOOM;
      flow.setViewport({
        x: placed(target.x + target.width / 2, all.x, all.x + all.width, w, zoom),
        y: placed(target.y + target.height / 2, all.y, all.y + all.height, h, zoom),
        zoom,
      }, { duration: 0 });
    }, 60);
    return () => clearTimeout(timer);
  }, [signature, ready, width, height]);       // eslint-disable-line react-hooks/exhaustive-deps

  // the least move that brings a box into view, `right` px on the right covered (by the step drawer), at
  // once: an animated move zooms out and back in on its way (d3's interpolateZoom), the text unreadable meanwhile
  function bringIntoView(id, right = 0) {
    if (!ready || !id || !flow.getInternalNode(id)) return;
    const box = flow.getNodesBounds([id]);
    const { x, y, zoom } = flow.getViewport();
    const shift = (low, size, span) => (low < PAD ? PAD - low : low + span > size - PAD ? Math.max(PAD - low, size - PAD - low - span) : 0);
    const dx = shift(box.x * zoom + x, width - right, box.width * zoom);
    const dy = shift(box.y * zoom + y, height, box.height * zoom);
    if (dx || dy) flow.setViewport({ x: x + dx, y: y + dy, zoom }, { duration: 0 });
  }
  useEffect(() => bringIntoView(running), [running]);        // eslint-disable-line react-hooks/exhaustive-deps
  // the box whose step the drawer shows stays visible beside it (stepdrawer.css: min(440px, 92%) wide)
  useEffect(() => bringIntoView(selected, Math.min(440, width * 0.92)), [selected]);       // eslint-disable-line react-hooks/exhaustive-deps

  return null;
}
