// The page's shell: sign-in, the hash routes, and which panel shows.
//   #/agents                                  the agents (list, create)
//   #/agents/<id>                             run the agent: its graph, a new chat, its sessions
//   #/agents/<id>/sessions/<sid>              the same with a session reopened
//   #/agents/<id>/sessions/<sid>/trace        every step of every turn, and forks
//   #/agents/<id>/evaluations                 the agent's evaluations over datasets (testing.js)
import { api, token, ApiError } from './api.js';
import { h, clear, notify } from './dom.js';
import { agentsPage } from './agents.js';
import { runPage } from './run.js';
import { tracePage } from './trace.js';
import { evaluationsPage } from './testing.js';

const main = document.getElementById('main');
const signOut = document.getElementById('sign-out');

function signInPage(message) {
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true,
    spellcheck: 'false', 'aria-describedby': 'token-help' });
  const error = h('p', { class: 'error', role: 'alert', id: 'sign-in-error' }, message || '');
  const form = h('form', { class: 'card sign-in', 'aria-labelledby': 'sign-in-title' },
    h('h1', { id: 'sign-in-title' }, 'Sign in'),
    h('label', { for: 'token' }, 'API token'),
    input,
    h('p', { class: 'muted', id: 'token-help' },
      'A token from ', h('code', {}, 'canvas2graph tokens create --tenant NAME'),
      '. It is kept in this tab only (sessionStorage) and sent in the Authorization header.'),
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
    error);
  form.addEventListener('submit', async event => {
    event.preventDefault();
    token.set(input.value.trim());
    try {
      await api('GET', '/agents?page_size=1');
    } catch (e) {
      token.clear();
      error.textContent = e instanceof ApiError && (e.status === 401 || e.code === 109)
        ? 'This token is not valid (revoked or mistyped).' : `Cannot sign in: ${e.message}`;
      input.focus();
      return;
    }
    input.value = '';
    if (!location.hash.startsWith('#/') || location.hash === '#/') location.hash = '#/agents';
    else render();
  });
  clear(main).append(form);
  input.focus();
}

let current = null;       // the shown panel's {leave()} (stops its streams)

async function render() {
  if (current && current.leave) current.leave();
  current = null;
  const signedIn = Boolean(token.get());
  signOut.hidden = !signedIn;
  if (!signedIn) return signInPage();
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  clear(main);
  try {
    if (parts[0] === 'agents' && parts[1]) {
      if (parts[2] === 'sessions' && parts[3] && parts[4] === 'trace') current = await tracePage(main, parts[1], parts[3]);
      else if (parts[2] === 'evaluations') current = await evaluationsPage(main, parts[1]);
      else current = await runPage(main, parts[1], parts[2] === 'sessions' ? parts[3] : null);
    } else {
      current = await agentsPage(main);
    }
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.code === 109)) {
      token.clear();
      return signInPage('Your token is no longer valid: sign in again.');
    }
    const missing = e instanceof ApiError && / not found/.test(e.message);
    clear(main).append(h('div', { class: 'card' }, h('h1', {}, missing ? 'Not found' : 'Something went wrong'),
      h('p', { class: 'error', role: 'alert' }, e.message), h('p', {}, h('a', { href: '#/agents' }, 'Back to the agents'))));
  }
}

signOut.addEventListener('click', () => {
  token.clear();
  notify('Signed out.');
  render();
});

window.addEventListener('hashchange', () => {
  if (location.hash.startsWith('#/') || location.hash === '') render();
});
render();
