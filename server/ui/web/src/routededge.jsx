// The editor's edge: React Flow's bezier from handle to handle where that curve passes no other box, and
// where it would, a path found around the boxes (react-flow-smart-edge's grid pathfinding, drawn with
// rounded right angles). Routing runs only for the edges that need it, on the main thread: the editor's
// graphs are tens of boxes, and the library's worker would need a looser Content-Security-Policy.
import { memo, useMemo } from 'react';
import { BaseEdge, getBezierPath, useStore } from '@xyflow/react';
import { getSmartEdge, smartEdgePresets } from '@tisoap/react-flow-smart-edge';

const ROUTING = { nodePadding: 14, gridRatio: 10, drawEdge: smartEdgePresets.smoothstep.drawEdge,
  generatePath: smartEdgePresets.smoothstep.generatePath };

/** The boxes edges keep clear of: every drawn node but groups (an Iteration holds its edges), as
 * {id, x, y, width, height} in flow coordinates. */
function boxesOf(nodeLookup) {
  const out = [];
  for (const n of nodeLookup.values()) {
    const width = n.measured && n.measured.width;
    const height = n.measured && n.measured.height;
    if (!width || !height || (n.data && n.data.container)) continue;
    const at = (n.internals && n.internals.positionAbsolute) || n.position;
    out.push({ id: n.id, x: at.x, y: at.y, width, height });
  }
  return out;
}

const sameBoxes = (a, b) => a.length === b.length
  && a.every((p, i) => p.id === b[i].id && p.x === b[i].x && p.y === b[i].y && p.width === b[i].width && p.height === b[i].height);

/** Points along a cubic bezier path "M x,y C x1,y1 x2,y2 x,y" (what getBezierPath returns). */
function bezierPoints(path, steps = 32) {
  const n = (path.match(/-?\d+(\.\d+)?(e-?\d+)?/g) || []).map(Number);
  if (n.length < 8) return [];
  const [x0, y0, x1, y1, x2, y2, x3, y3] = n;
  const out = [];
  for (let i = 1; i < steps; i++) {
    const t = i / steps;
    const u = 1 - t;
    out.push([u * u * u * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t * t * t * x3,
      u * u * u * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t * t * t * y3]);
  }
  return out;
}

/** Whether a curve through `points` passes inside a box other than its own ends' (a few pixels of slack). */
export function crossesBoxes(points, boxes, source, target) {
  const inner = 3;
  return boxes.some(b => b.id !== source && b.id !== target && points.some(([x, y]) =>
    x > b.x + inner && x < b.x + b.width - inner && y > b.y + inner && y < b.y + b.height - inner));
}

export const RoutedEdge = memo(function RoutedEdge({ id, source, target, sourceX, sourceY, targetX, targetY, sourcePosition,
  targetPosition, markerEnd, style, interactionWidth }) {
  const boxes = useStore(s => boxesOf(s.nodeLookup), sameBoxes);
  const [bezier] = getBezierPath({ sourceX, sourceY, sourcePosition, targetX, targetY, targetPosition });
  const path = useMemo(() => {
    if (!crossesBoxes(bezierPoints(bezier), boxes, source, target)) return bezier;
    const nodes = boxes.map(b => ({ id: b.id, position: { x: b.x, y: b.y }, measured: { width: b.width, height: b.height }, data: {} }));
    const routed = getSmartEdge({ sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition, nodes, options: ROUTING });
    return routed instanceof Error ? bezier : routed.svgPathString;
  }, [bezier, boxes, source, target, sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition]);
  return <BaseEdge id={id} path={path} markerEnd={markerEnd} style={style} interactionWidth={interactionWidth} />;
});

export const edgeTypes = { routed: RoutedEdge };
