"""A Chromium session for the Browser component, driven with Playwright: what the model sees of the
page, and the actions it can take on it.

Chromium is Debian's (or the one the policy names), launched by Playwright with `executable_path`;
Playwright's own browser download is never used. It runs headless unless the canvas asks otherwise
and a display exists, without its sandbox unless `chromium_sandbox` is set (RAGFlow's default, for
containers running as root), with background networking, component updates and sync off. All its
traffic goes through the guard's proxy (`network.py`).

The page is shown to the model as its URL, title, the visible text (cut at the policy's limit) and a
numbered list of the elements it can act on; actions name elements by those numbers.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from canvas2graph.nodes.browser.network import GuardProxy, HostRefused
from canvas2graph.nodes.browser.policy import BrowserPolicy, BrowserRefused
from canvas2graph.nodes.tool import ToolError

FLAGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--no-default-browser-check", "--disable-dev-shm-usage",
         # Chromium reaches nothing by itself: no name resolution, no UDP, every connection through the proxy
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-bypass-list=<-loopback>",
         "--force-webrtc-ip-handling-policy=disable_non_proxied_udp"]
MAX_ELEMENTS = 200

# Numbers the elements a model can act on (visible links, buttons, fields) and reads the page's text.
SNAPSHOT_JS = """() => {
  const selector = 'a[href], button, input, select, textarea, summary, [role=button], [role=link], [onclick]';
  document.querySelectorAll('[data-c2g]').forEach(e => e.removeAttribute('data-c2g'));
  const elements = [];
  for (const el of document.querySelectorAll(selector)) {
    if (elements.length >= %d) break;
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (el.type === 'hidden' || el.disabled || style.visibility === 'hidden' || style.display === 'none') continue;
    if ((box.width === 0 || box.height === 0) && el.type !== 'file') continue;
    const index = elements.length;
    el.setAttribute('data-c2g', String(index));
    const label = (el.innerText || el.value || el.getAttribute('aria-label') || el.getAttribute('title') || '')
      .trim().replace(/\\s+/g, ' ').slice(0, 100);
    elements.push({index, tag: el.tagName.toLowerCase(), type: el.getAttribute('type') || '', label,
                   name: el.getAttribute('name') || '', placeholder: el.getAttribute('placeholder') || '',
                   href: el.getAttribute('href') || ''});
  }
  return {elements, text: document.body ? document.body.innerText : ''};
}""" % MAX_ELEMENTS


class BrowserSession:
    """One Chromium for one run of a Browser node. Use as `async with BrowserSession(...) as s:`."""

    def __init__(self, policy: BrowserPolicy, ctx: Any, *, download_dir: Path, profile_dir: Path | None,
                 headless: bool, sandbox: bool, upload_paths: list[str]):
        self.policy, self.ctx = policy, ctx
        self.download_dir, self.profile_dir = download_dir, profile_dir
        self.headless = headless or not os.environ.get("DISPLAY")
        self.sandbox = sandbox
        self.upload_paths = list(upload_paths)
        self.proxy = GuardProxy(ctx, timeout=policy.action_timeout, max_bytes=policy.max_body_bytes)
        self.downloads: list[Path] = []
        self._pending_downloads: list[asyncio.Task] = []
        self._watched: list = []
        self._playwright = None
        self._browser = None
        self.context = None
        self.page = None

    # --- lifecycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> "BrowserSession":
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise BrowserRefused("the Browser component needs Playwright, which is not installed: "
                                 "pip install 'canvas2graph[browser]'") from None
        executable = self.policy.browser_binary()
        proxy = await self.proxy.start()
        self._playwright = await async_playwright().start()
        args = FLAGS + [f"--proxy-server={proxy}"] + ([] if self.sandbox else ["--no-sandbox"])
        options = dict(executable_path=executable, headless=self.headless, args=args)
        context_options = dict(accept_downloads=True, service_workers="block", viewport={"width": 1280, "height": 900})
        try:
            if self.profile_dir is not None:
                self.context = await self._playwright.chromium.launch_persistent_context(
                    str(self.profile_dir), **options, **context_options)
            else:
                self._browser = await self._playwright.chromium.launch(**options)
                self.context = await self._browser.new_context(**context_options)
        except Exception:
            await self._playwright.stop()
            await self.proxy.close()
            raise
        self.context.set_default_timeout(self.policy.action_timeout * 1000)
        self.context.on("page", self._adopt)
        self.page = self.context.pages[0] if self.context.pages else await self.context.new_page()
        self._watch(self.page)
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            if self._pending_downloads:
                await asyncio.gather(*self._pending_downloads, return_exceptions=True)
            await self.context.close()
            if self._browser is not None:
                await self._browser.close()
        finally:
            await self._playwright.stop()
            await self.proxy.close()

    def _adopt(self, page) -> None:
        """A page the site opened (a new tab, a popup) becomes the page the model works on."""
        self.page = page
        self._watch(page)

    def _watch(self, page) -> None:
        if page in self._watched:
            return
        self._watched.append(page)
        page.on("download", lambda d: self._pending_downloads.append(asyncio.ensure_future(self._save(d))))

    async def _save(self, download) -> None:
        name = os.path.basename(download.suggested_filename) or "download.bin"
        path = self.download_dir / name
        n = 1
        while path.exists():
            path = self.download_dir / f"{Path(name).stem}_{n}{Path(name).suffix}"
            n += 1
        await download.save_as(str(path))
        self.downloads.append(path)

    # --- what the model sees ---------------------------------------------------------------------
    async def describe(self) -> str:
        page = self.page
        try:
            snapshot = await page.evaluate(SNAPSHOT_JS)
            title = await page.title()
        except Exception as e:          # a page that is navigating away, or closed
            return f"URL: {page.url}\n(the page cannot be read right now: {_short(e)})"
        lines = [f"URL: {page.url}", f"Title: {title}", "", "Interactive elements:"]
        for el in snapshot["elements"]:
            attrs = "".join(f' {k}="{el[k]}"' for k in ("type", "name", "placeholder", "href") if el[k])
            lines.append(f"[{el['index']}] <{el['tag']}{attrs}> {el['label']}".rstrip())
        if not snapshot["elements"]:
            lines.append("(none)")
        text = " ".join(snapshot["text"].split()) if snapshot["text"] else ""
        limit = self.policy.max_page_chars
        lines += ["", "Page text:", text[:limit] + (" [...]" if len(text) > limit else "")]
        return "\n".join(lines)

    # --- actions ----------------------------------------------------------------------------------
    async def act(self, name: str, args: dict[str, Any]) -> str:
        """Run one action; returns what happened, in words for the model (failures included)."""
        self.proxy.refused.clear()
        try:
            outcome = await getattr(self, f"_{name}")(**args)
        except TypeError as e:
            return f"{name} failed: wrong arguments ({e})"
        except (ToolError, ValueError) as e:
            return f"{name} failed: {e}"
        except Exception as e:           # Playwright's errors: timeouts, detached elements, refused loads
            outcome = f"{name} failed: {_short(e)}"
        if self.proxy.refused:
            outcome += "\nRefused by the host guard: " + "; ".join(dict.fromkeys(self.proxy.refused))
        return outcome

    async def _go_to_url(self, url: str) -> str:
        if not str(url).startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        response = await self.page.goto(str(url), wait_until="load")
        status = f" (HTTP {response.status})" if response is not None else ""
        return f"Opened {self.page.url}{status}"

    async def _click_element(self, index: int) -> str:
        element = self._element(index)
        await element.click()
        await self._settle()
        return f"Clicked element [{index}]"

    async def _input_text(self, index: int, text: str, press_enter: bool = False) -> str:
        element = self._element(index)
        await element.fill(str(text))
        if press_enter:
            await element.press("Enter")
            await self._settle()
        return f"Typed into element [{index}]" + (" and pressed Enter" if press_enter else "")

    async def _select_option(self, index: int, value: str) -> str:
        chosen = await self._element(index).select_option(label=str(value))
        return f"Selected {', '.join(chosen)} in element [{index}]"

    async def _upload_file(self, index: int, path: str) -> str:
        # the offered path, or just its file name (a model may well give only that)
        chosen = [p for p in self.upload_paths if p == path or os.path.basename(p) == os.path.basename(str(path))]
        if not chosen:
            raise ValueError(f"{path!r} is not one of the files offered for upload")
        path = chosen[0]
        await self._element(index).set_input_files(path)
        return f"Chose {os.path.basename(path)} in element [{index}]"

    async def _scroll(self, direction: str = "down") -> str:
        amount = -800 if str(direction).lower() == "up" else 800
        await self.page.mouse.wheel(0, amount)
        return f"Scrolled {'up' if amount < 0 else 'down'}"

    async def _go_back(self) -> str:
        await self.page.go_back(wait_until="load")
        return f"Went back to {self.page.url}"

    def _element(self, index: Any):
        try:
            index = int(index)
        except (TypeError, ValueError):
            raise ValueError(f"{index!r} is not an element number") from None
        return self.page.locator(f'[data-c2g="{index}"]').first

    async def _settle(self) -> None:
        """Give a click or a submit time to start and finish the navigation it causes, if any."""
        try:
            await self.page.wait_for_load_state("load", timeout=min(self.policy.action_timeout, 10) * 1000)
        except Exception:
            pass


def _short(error: Exception) -> str:
    return (str(error) or type(error).__name__).splitlines()[0][:300]


__all__ = ["BrowserSession", "HostRefused"]
