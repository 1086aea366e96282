// The editor's palette: every component it can add, searchable and grouped as RAGFlow's canvas groups
// them. A click adds one (where the editor puts new boxes); a drag onto the canvas drops it where it is let
// go, or, let go on an edge, between that edge's two boxes. Enter in the search adds the first match.
import { useState } from 'react';
import { paletteGroups } from './palettemodel.js';

/** The drag's data type: the component type travels as the drag's text under it. */
export const DRAG_TYPE = 'application/x-canvas2graph-component';

export function ComponentPalette({ types, onAdd }) {
  const [query, setQuery] = useState('');
  const groups = paletteGroups(types, query);
  const first = groups.length ? groups[0].items[0] : null;
  const keys = event => {
    if (event.key === 'Enter' && first) { event.preventDefault(); onAdd(first.type); }
    if (event.key === 'Escape' && query) { event.stopPropagation(); setQuery(''); }
  };
  return (
    <nav className="component-palette" aria-label="Components to add">
      <input type="search" className="palette-search" aria-label="Search components" placeholder="Search components"
        value={query} onChange={e => setQuery(e.target.value)} onKeyDown={keys} />
      {groups.map(g => (
        <section key={g.name} className="palette-group" aria-label={g.name}>
          <h3>{g.name}</h3>
          <ul>
            {g.items.map(item => (
              <li key={item.type}>
                <button type="button" className="palette-item" data-kind={item.type} draggable
                  title={`${item.type}: click to add, or drag onto the canvas or onto an edge`}
                  onDragStart={e => { e.dataTransfer.setData(DRAG_TYPE, item.type); e.dataTransfer.setData('text/plain', item.type); e.dataTransfer.effectAllowed = 'copy'; }}
                  onClick={() => onAdd(item.type)}>
                  {item.name}{item.name !== item.type ? <span className="palette-type">{item.type}</span> : null}
                </button>
              </li>
            ))}
          </ul>
        </section>
      ))}
      {groups.length ? null : <p className="muted">No component matches “{query}”.</p>}
    </nav>
  );
}
