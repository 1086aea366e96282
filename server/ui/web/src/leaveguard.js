// Asking before unsaved edits are left behind: the browser's own question when the page is closed or
// reloaded (beforeunload), and a confirm() before the app's hash changes (a link, Back, a typed address).
// A hashchange comes too late to stop (the app's router has seen it), so the hash navigation is caught
// before it happens: the Navigation API's cancelable `navigate` event where the browser has it, else a
// click on an in-app link.
import { useEffect, useRef } from 'react';

export const LEAVE_QUESTION = 'This agent has unsaved changes. Leave the editor and lose them?';

/** While `dirty`, leaving asks first. Returns `release()`: leaving then asks no more (a save that opens
 * the saved agent). */
export function useLeaveGuard(dirty) {
  const state = useRef({ dirty, released: false });
  state.current.dirty = dirty;
  useEffect(() => {
    const guarded = () => state.current.dirty && !state.current.released;
    const stay = () => {
      if (window.confirm(LEAVE_QUESTION)) { state.current.released = true; return false; }
      return true;
    };
    const unload = event => {
      if (!guarded()) return;
      event.preventDefault();
      event.returnValue = '';          // what older Chromium needs to ask
    };
    const navigate = event => {
      if (guarded() && event.hashChange && event.cancelable && stay()) event.preventDefault();
    };
    const click = event => {
      const link = event.target.closest && event.target.closest('a[href^="#"]');
      if (link && link.getAttribute('href') !== location.hash && guarded() && stay()) event.preventDefault();
    };
    const nav = window.navigation;
    window.addEventListener('beforeunload', unload);
    if (nav) nav.addEventListener('navigate', navigate);
    else document.addEventListener('click', click, true);
    return () => {
      window.removeEventListener('beforeunload', unload);
      if (nav) nav.removeEventListener('navigate', navigate);
      else document.removeEventListener('click', click, true);
    };
  }, []);
  return { release() { state.current.released = true; } };
}
