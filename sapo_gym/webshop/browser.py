"""``sapo/WebShop-Browser-v0``: the same shop served by flask, driven by selenium in headless Chromium.

Each env starts the flask app (:mod:`.app`) on a free port of 127.0.0.1 in a background thread
and one headless Chromium (Debian's ``/usr/bin/chromium`` and ``/usr/bin/chromedriver``; no
driver download). Actions have the text env's grammar: ``search[q]`` types into the search box
and clicks ``Search`` (off the search page, or for a query with characters WebDriver cannot type,
the browser submits the same search form by script: the text env runs a search from any page),
``click[x]`` clicks the button, product link or option labelled ``x``. The
observation, admissible actions and score are read back from the browser's DOM (visible text
nodes in document order; ``data-click`` marks clickables; ``<body data-score>`` the score).
The oracle (``expert_action``) reads the served session, which lives in this process.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from werkzeug.serving import WSGIRequestHandler, make_server

from sapo_gym.core import TaskInfo, Turn
from sapo_gym.webshop.env import WebShopEnv
from sapo_gym.webshop.shop import accepts, agent_observation, available_actions, parse_shop_action, simple_observation

__all__ = ["WebShopBrowserEnv", "DomPage", "chrome_options"]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
_CLICK_RANK = {"button": 0, "link": 1, "option": 2}

_READ_PAGE = """
const texts = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
while (walker.nextNode()) {
  const node = walker.currentNode, parent = node.parentElement;
  if (!parent || ['SCRIPT', 'STYLE', 'NOSCRIPT'].includes(parent.tagName)) continue;
  const t = node.textContent.trim();
  if (t) texts.push(t);
}
const outcome = document.getElementById('outcome');
return {
  texts: texts,
  clicks: Array.from(document.querySelectorAll('[data-click]')).map(e => [e.dataset.kind, e.dataset.click]),
  search: document.getElementById('search_input') !== null,
  kind: document.body.dataset.page, nonce: document.body.dataset.nonce,
  score: document.body.dataset.score === undefined ? null : Number(document.body.dataset.score),
  outcome: outcome ? JSON.parse(outcome.textContent) : null,
};
"""
_SUBMIT_SEARCH = """
const form = document.createElement('form');
form.method = 'post';
form.action = arguments[0];
const box = document.createElement('input');
box.type = 'hidden';
box.name = 'q';
box.value = arguments[1];
form.appendChild(box);
document.body.appendChild(form);
form.submit();
"""
_FIND_CLICKABLE = """
const [kind, key] = [arguments[0], arguments[1]];
return Array.from(document.querySelectorAll('[data-click]')).find(e => e.dataset.kind === kind && e.dataset.click === key);
"""


class _QuietHandler(WSGIRequestHandler):
    """No log line per request."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass(frozen=True)
class DomPage:
    """What the browser shows: visible texts, clickables, search box, score."""

    texts: list[str]
    clicks: list[tuple[str, str]]
    has_search_bar: bool
    kind: str
    nonce: str
    score: float | None
    outcome: dict[str, Any] | None

    @property
    def clickables(self) -> list[str]:
        ranked = sorted(self.clicks, key=lambda c: _CLICK_RANK[c[0]])
        return list(dict.fromkeys(key for _, key in ranked))

    def kind_of(self, key: str) -> str:
        return min((c for c in self.clicks if c[1] == key), key=lambda c: _CLICK_RANK[c[0]])[0]


def chrome_options(user_data_dir: str) -> Any:
    """Headless Chromium that never reaches the network on its own."""
    from selenium.webdriver.chrome.options import Options

    opts = Options()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-extensions",
        "--disable-sync",
        f"--user-data-dir={user_data_dir}",
    ):
        opts.add_argument(flag)
    return opts


class WebShopBrowserEnv(WebShopEnv):
    """WebShop through a real browser (see the module docstring); the text env's keyword arguments plus ``page_timeout_s``."""

    env_name = "WebShop-Browser"
    fallback_chars = 20

    def __init__(self, *, page_timeout_s: float = 20.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.page_timeout_s = page_timeout_s
        self._server: Any = None
        self._driver: Any = None
        self._stop: weakref.finalize | None = None
        self._sid: str | None = None
        self._dom: DomPage | None = None

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        if self._driver is not None:
            return
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        from sapo_gym.webshop.app import create_app
        from sapo_gym.webshop.search import shared_index

        app = create_app(
            self.catalog,
            shared_index(self.catalog),
            goal_range=self._goal_indices,
            show_attrs=self.show_attrs,
            nouns=self.nouns,
        )
        self._server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler)
        threading.Thread(target=self._server.serve_forever, name="webshop-flask", daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self._server.server_port}"
        self._state = app.extensions["webshop"]
        profile = tempfile.mkdtemp(prefix="sapo-webshop-chromium-")
        os.environ.setdefault("SE_AVOID_STATS", "true")
        self._driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=chrome_options(profile))
        self._driver.set_page_load_timeout(self.page_timeout_s)
        self._stop = weakref.finalize(self, _shutdown, self._driver, self._server, profile)

    def close(self) -> None:
        """Stop Chromium and the server (also done at garbage collection or exit if never called)."""
        if self._stop is not None:
            self._stop()
            self._stop = None
            self._driver = self._server = None
        super().close()

    # ------------------------------------------------------------------ DOM
    def _read(self) -> DomPage:
        raw = self._driver.execute_script(_READ_PAGE)
        return DomPage(
            [str(t) for t in raw["texts"]],
            [(str(k), str(c)) for k, c in raw["clicks"]],
            bool(raw["search"]),
            str(raw["kind"]),
            str(raw["nonce"]),
            raw["score"],
            raw["outcome"],
        )

    def _wait_for_nonce_change(self, old: str) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self._driver, self.page_timeout_s).until(
            lambda d: (
                d.execute_script(
                    "return document.readyState === 'complete' && document.body && document.body.dataset.nonce"
                )
                not in (None, False, old)
            )
        )

    def _turn_of_dom(self) -> Turn:
        dom = self._dom = self._read()
        assert self.session is not None
        instruction = self.session.goal.instruction_text
        extra: dict[str, Any] = {"simple_observation": simple_observation(dom.texts)}
        actions = available_actions(dom.has_search_bar, dom.clickables)
        obs = agent_observation(dom.texts, instruction)
        if dom.kind != "done" or dom.score is None:
            return Turn(obs, actions, extra=extra)
        won = dom.score == 1.0
        extra["reward_breakdown"] = dom.outcome
        return Turn(
            obs,
            actions,
            won=won,
            lost=not won,
            score=dom.score,
            reward=self.success_reward if won else 0.0,
            extra=extra,
        )

    # ------------------------------------------------------------------ backend hooks
    def _load_task(self, index: int) -> tuple[TaskInfo, Turn]:
        self._start()
        goal = self.goal(index)
        self._driver.get(f"{self.base_url}/start/{self._goal_indices[index]}")
        self._sid = self._driver.current_url.rstrip("/").rsplit("/", 1)[-1]
        self.session = self._state.sessions[self._sid]
        info = TaskInfo(
            task=goal.instruction_text, task_id=self._ids[index], task_type=goal.category, dataset=self._dataset_name()
        )
        return info, self._turn_of_dom()

    def is_admissible(self, action: str) -> bool:
        """What the page in the browser takes (read from its DOM, not from the server's session)."""
        assert self._dom is not None and self._turn is not None
        return action in self._turn.admissible_actions or _dom_accepts(self._dom, action)

    def _backend_step(self, action: str) -> Turn:
        from selenium.webdriver.common.by import By

        dom = self._dom
        assert dom is not None
        already_done = dom.kind == "done"
        if not already_done and _dom_accepts(dom, action):
            verb, arg = parse_shop_action(action)  # type: ignore[misc]
            if verb == "search" and dom.has_search_bar and _typeable(arg):
                box = self._driver.find_element(By.ID, "search_input")
                box.clear()
                box.send_keys(arg)
                self._driver.find_element(By.CSS_SELECTOR, "form.search button").click()
            elif verb == "search":
                self._driver.execute_script(_SUBMIT_SEARCH, f"{self.base_url}/s/{self._sid}/search", arg)
            else:  # a real (WebDriver) click on the element the DOM marks with this key
                self._driver.execute_script(_FIND_CLICKABLE, dom.kind_of(arg), arg).click()
            self._wait_for_nonce_change(dom.nonce)
        turn = self._turn_of_dom()
        if already_done:
            turn.reward = 0.0
        return turn


def _shutdown(driver: Any, server: Any, profile: str) -> None:
    driver.quit()
    server.shutdown()
    shutil.rmtree(profile, ignore_errors=True)


def _dom_accepts(dom: DomPage, action: str) -> bool:
    return dom.kind != "done" and accepts(action, dom.clickables)


def _typeable(text: str) -> bool:
    """Whether WebDriver types ``text`` as it is: printable, in the BMP (ChromeDriver's limit), outside
    WebDriver's key codes (U+E000-U+F8FF), and not blank (a ``required`` box refuses an empty value)."""
    return bool(text.strip()) and text.isprintable() and all(ord(c) < 0xE000 or 0xF8FF < ord(c) <= 0xFFFF for c in text)
