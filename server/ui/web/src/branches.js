// A session's message log as a tree of turns, as LangGraph Studio's thread view and ChatGPT show a
// conversation: a fork ("Run again from here" on the trace page) is another version of the turn it ran
// again, a sibling of it, not a turn after it. The server's log is linear (the session continues from its
// newest branch); a fork's question carries `fork: {component_id, query?, of}`, `of` being the message id
// of the turn it ran again (logs written before `of` existed: the turn before it, the usual fork).

/**
 * The tree of a message log. Every question (a user message: asked, a form's answer or a fork) opens a
 * turn, as on the trace page; answers go to the turn before them.
 * Returns {lead: the messages before the first question (Begin's prologue), nodes: Map key -> turn,
 * children: Map parent key ('' for the first turns) -> [keys, oldest first], tip: the newest turn's key}.
 * A turn: {key, parent, question, answers, fork}.
 */
export function turnTree(messages) {
  const lead = [];
  const nodes = new Map();
  const children = new Map();
  let tip = null;
  (messages || []).forEach((m, i) => {
    if (m.role === 'user') {
      const forked = m.fork ? (m.fork.of && [...nodes.values()].find(n => n.question.id === m.fork.of)) || nodes.get(tip) : null;
      const parent = forked ? forked.parent : tip;
      const key = nodes.has(m.id) || !m.id ? `${m.id || 'turn'}#${i}` : m.id;
      nodes.set(key, { key, parent, question: m, answers: [], fork: m.fork || null });
      const siblings = children.get(parent ?? '') || [];
      children.set(parent ?? '', [...siblings, key]);
      tip = key;
    } else if (m.role === 'assistant') {
      if (tip === null) lead.push(m);
      else nodes.get(tip).answers.push(m);
    }
  });
  return { lead, nodes, children, tip };
}

/**
 * The turns shown, first to last: at each turn the version `choice` picks ({parent key: index}), else
 * the one leading to the newest turn (the session's current branch), else the newest version.
 * Each entry: {turn, number (1-based), index, count}.
 */
export function shownTurns(tree, choice = {}) {
  const current = new Set();
  for (let key = tree.tip; key !== null && key !== undefined; key = tree.nodes.get(key).parent) current.add(key);
  const shown = [];
  let parent = '';
  for (;;) {
    const kids = tree.children.get(parent) || [];
    if (!kids.length) return shown;
    let index = choice[parent];
    if (!(index >= 0 && index < kids.length)) {
      index = kids.findIndex(k => current.has(k));
      if (index < 0) index = kids.length - 1;
    }
    const turn = tree.nodes.get(kids[index]);
    shown.push({ turn, number: shown.length + 1, index, count: kids.length });
    parent = turn.key;
  }
}

/** The versions of the turn whose question has message id `messageId`: {index, count}, or null. */
export function versionsOf(tree, messageId) {
  const turn = [...tree.nodes.values()].find(n => n.question.id === messageId);
  if (!turn) return null;
  const kids = tree.children.get(turn.parent ?? '') || [];
  return { index: kids.indexOf(turn.key), count: kids.length };
}

/** A fork's question as it was edited (its first step's `sys.query`), else its turn's own. */
export function forkQuery(turn) {
  const first = ((turn.steps || [])[0] || {}).inputs || {};
  if (turn.fork_of && typeof first['sys.query'] === 'string' && first['sys.query'] !== turn.query) return first['sys.query'];
  return turn.query;
}

/**
 * A traced branch's turns (GET .../trace) numbered as the chat numbers them: a fork's run takes the place
 * of the turn it ran again (on the fork's branch that turn holds only the steps before the fork point, and
 * the fork's run follows it), so the two read as one turn, `rerun` saying where the fork started
 * ({component_id, step: its index}). A fork of turn 2 stays turn 2.
 */
export function versionTurns(turns) {
  const shown = [];
  for (const turn of turns || []) {
    const last = shown.at(-1);
    if (turn.fork_of && last && last.raw === turn.fork_of) {
      const before = last.steps || [];
      shown[shown.length - 1] = { ...turn, raw: turn.turn, turn: last.turn, fork_of: undefined, query: forkQuery(turn),
        steps: [...before, ...(turn.steps || [])],
        rerun: { component_id: ((turn.steps || [])[0] || {}).component_id, step: before.length } };
    } else {
      shown.push({ ...turn, raw: turn.turn, turn: shown.length + 1 });
    }
  }
  return shown;
}

/**
 * The steps a version of a turn ran, for the canvas: `fetchSteps(messageId)` gives a run's own steps (the
 * logs route, whichever branch holds it); a fork's run starts at its fork point, so the steps the turn it
 * ran again took before that point come first (a fork of a fork: its own fork point's, and so on).
 */
export async function stepsOfVersion(tree, turn, fetchSteps) {
  const own = await fetchSteps(turn.question.id);
  const fork = turn.fork;
  const forked = fork && fork.of ? [...tree.nodes.values()].find(n => n.question.id === fork.of) : null;
  if (!forked) return own;
  const before = await stepsOfVersion(tree, forked, fetchSteps);
  const at = before.findIndex(s => s.component_id === fork.component_id);
  return [...before.slice(0, at < 0 ? before.length : at), ...own];
}
