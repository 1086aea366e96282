// What the editor's palette offers, grouped and named as RAGFlow's canvas offers its components (its
// accordion of operators: Foundation, Dialogue, Flow, Data manipulation, Tools), and the friendly name a new
// box gets ("Await response" for a UserFillUp). What RAGFlow's accordion no longer lists (its older tools:
// AkShare, DeepL, Crawler...) goes last among the Tools; a type with no friendly name is named by its type.

/** RAGFlow's groups, in its order, each with the component types it lists (ours where the names differ). */
export const GROUPS = [
  { name: 'Foundation', types: ['Agent', 'Retrieval', 'LLM'] },
  { name: 'Dialogue', types: ['Message', 'UserFillUp'] },
  { name: 'Flow', types: ['Switch', 'Iteration', 'Loop', 'ExitLoop', 'Categorize'] },
  { name: 'Data manipulation', types: ['CodeExec', 'StringTransform', 'DataOperations', 'VariableAssigner', 'ListOperations',
    'VariableAggregator', 'ExcelProcessor'] },
  { name: 'Tools', types: ['TavilySearch', 'TavilyExtract', 'QueritContents', 'QueritSearch', 'ExeSQL', 'Google', 'YahooFinance',
    'Email', 'DuckDuckGo', 'Wikipedia', 'GoogleScholar', 'ArXiv', 'PubMed', 'BGPT', 'GitHub', 'Invoke', 'WenCai', 'SearXNG',
    'KeenableSearch', 'DocGenerator', 'Browser'] },
];

// RAGFlow's English names of its operators (its locale's `flow.<type>`), where they are not the type itself
const FRIENDLY = {
  UserFillUp: 'Await response', ExitLoop: 'Exit loop', CodeExec: 'Code', StringTransform: 'Text processing',
  DataOperations: 'Data operations', ListOperations: 'List operations', VariableAssigner: 'Variable assigner',
  VariableAggregator: 'Variable aggregator', TavilySearch: 'Tavily search', TavilyExtract: 'Tavily extract',
  QueritSearch: 'Querit search', QueritContents: 'Querit contents', ExeSQL: 'Execute SQL', GoogleScholar: 'Google Scholar',
  Invoke: 'HTTP request', KeenableSearch: 'Keenable', DocGenerator: 'Doc Generator', ExcelProcessor: 'Excel processor',
};

/** The name RAGFlow gives a component of `type` ("UserFillUp" -> "Await response"). */
export function friendlyName(type) {
  return FRIENDLY[type] || type;
}

/** The palette's groups for the addable `types`, each type as {type, name}, filtered by `query` (matched
 * against the type, its friendly name and the group, case-insensitively); empty groups left out. */
export function paletteGroups(types, query = '') {
  const q = query.trim().toLowerCase();
  const offered = new Set(types);
  const listed = new Set(GROUPS.flatMap(g => g.types));
  const unlisted = types.filter(t => !listed.has(t));
  const groups = GROUPS.map(g => ({ name: g.name, types: [...g.types.filter(t => offered.has(t)), ...(g.name === 'Tools' ? unlisted : [])] }));
  const hit = (group, type) => !q || [type, friendlyName(type), group].some(s => s.toLowerCase().includes(q));
  return groups.map(g => ({ name: g.name, items: g.types.filter(t => hit(g.name, t)).map(t => ({ type: t, name: friendlyName(t) })) }))
    .filter(g => g.items.length);
}
