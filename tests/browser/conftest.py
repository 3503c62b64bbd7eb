"""A real JupyterLab and a real headless Chromium (Debian's, driven by Playwright).

Tests here are marked ``browser``; tests/conftest.py skips them, loudly, where Chromium
is missing, and fails under CI (which installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# Screenshots go to a git-ignored build folder; `make screenshots` copies them to assets/.
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "build" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter(root: Path, app: str, *options: str) -> Iterator[str]:
    """A Jupyter server (``lab`` or ``notebook``, Notebook 7) on a free loopback port, with
    more command-line ``options``."""
    settings = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    overrides = settings / "overrides.json"
    if not overrides.exists():
        overrides.write_text(
            json.dumps(
                {
                    "@jupyterlab/apputils-extension:notification": {
                        "fetchNews": "false",
                        "checkForUpdates": False,
                    }
                }
            )
        )
    port = _free_port()
    app_class = "LabApp" if app == "lab" else "JupyterNotebookApp"
    url = f"http://127.0.0.1:{port}"
    yield from serve(
        [
            sys.executable, "-m", "jupyter", app, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            "--ServerApp.token=", "--ServerApp.password=", "--allow-root",
            f"--ServerApp.root_dir={root}", f"--{app_class}.expose_app_in_browser=True",
            "--ServerApp.disable_check_xsrf=True", *options,
        ],
        {  # settings (the theme a test picks) stay in the temporary folder
            "JUPYTER_PLATFORM_DIRS": "1",
            "JUPYTERLAB_SETTINGS_DIR": str(root.parent / f"{root.name}-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(root.parent / f"{root.name}-workspaces"),
        },
        url, f"{url}/api/status", root.parent / f"{root.name}-{app}.log", f"Jupyter {app}",
    )  # fmt: skip


def serve(
    cmd: list[str], env: dict[str, str], url: str, health: str, log_path: Path, name: str
) -> Iterator[str]:
    """Start a server (``cmd``, its output in ``log_path``; the kernels it starts import this
    checkout's fxviz), yield ``url`` once ``health`` answers, stop it afterwards."""
    log = open(log_path, "w")  # noqa: SIM115 (closed at teardown)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    server = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env, "PYTHONPATH": path}
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(health, timeout=2)
            break
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(log_path.read_text()) from None
            time.sleep(0.5)
    else:
        server.kill()
        raise RuntimeError(f"{name} did not start in 90 s:\n" + log_path.read_text())
    yield url
    server.terminate()
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> Iterator[dict]:
    """One JupyterLab server for the session, serving a temporary folder."""
    root = tmp_path_factory.mktemp("lab")
    for url in _jupyter(root, "lab"):
        yield {"url": url, "root": root, "open": f"{url}/lab/tree/{{}}?reset"}


@pytest.fixture(scope="session")
def lab_nodelay(tmp_path_factory) -> Iterator[dict]:
    """A JupyterLab server whose kernel websockets write every frame at once
    (``fxviz.server.NoDelayConnection``, the README's opt-in)."""
    root = tmp_path_factory.mktemp("lab-nodelay")
    option = "--ServerApp.kernel_websocket_connection_class=fxviz.server.NoDelayConnection"
    for url in _jupyter(root, "lab", option):
        yield {"url": url, "root": root, "open": f"{url}/lab/tree/{{}}?reset"}


@pytest.fixture(scope="session")
def notebook7(tmp_path_factory) -> Iterator[dict]:
    """One Jupyter Notebook 7 server for the session, serving a temporary folder."""
    root = tmp_path_factory.mktemp("nb7")
    for url in _jupyter(root, "notebook"):
        yield {"url": url, "root": root, "open": f"{url}/notebooks/{{}}"}


@pytest.fixture(params=["lab", "notebook7"])
def jupyter(request) -> dict:
    """Each front end in turn: JupyterLab, then Notebook 7."""
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        context.set_default_timeout(60_000)
        yield context
        context.close()


def write_notebook(root: Path, name: str, cells: list[str]) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(code) for code in cells]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, root / name)


def open_and_run(browser, lab: dict, name: str):
    """Open a notebook in JupyterLab or Notebook 7, wait for its kernel, run every cell."""
    page = browser.new_page()
    page.goto(lab["open"].format(name))
    page.wait_for_function(
        "window.jupyterapp && window.jupyterapp.shell.currentWidget && window.jupyterapp.shell.currentWidget.sessionContext && window.jupyterapp.shell.currentWidget.sessionContext.session && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
        timeout=90_000,
    )
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    return page


def screenshot(page, locator, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    locator.screenshot(path=str(path))
    return path


def set_theme(page, theme: str) -> None:
    """Switch the open JupyterLab or Notebook 7 to its ``light`` or ``dark`` theme, and
    wait until the page says so (the server remembers it: switch back when done)."""
    name = "JupyterLab Dark" if theme == "dark" else "JupyterLab Light"
    page.evaluate(
        "(name) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: name})",
        name,
    )
    light = "false" if theme == "dark" else "true"
    page.wait_for_function(f"document.body.dataset.jpThemeLight === '{light}'")


def run_in_kernel(page, code: str) -> None:
    """Execute ``code`` in the open notebook's kernel (as a cell would, without one)."""
    page.evaluate(
        "async (code) => { const kernel = window.jupyterapp.shell.currentWidget"
        ".sessionContext.session.kernel; await kernel.requestExecute({ code }).done; }",
        code,
    )


# What a person sees, measured in the page (never counts of elements).
LABELS_OUTSIDE = """() => {
  const out = [];
  for (const g of document.querySelectorAll('.fxviz-graph g.node')) {
    const shape = g.querySelector('polygon, ellipse, path');
    if (!shape) continue;
    const s = shape.getBoundingClientRect();
    for (const t of g.querySelectorAll('text')) {
      if (t.closest('.fxviz-marker')) continue;
      const b = t.getBoundingClientRect();
      if (b.left < s.left - 0.5 || b.right > s.right + 0.5 || b.top < s.top - 0.5
          || b.bottom > s.bottom + 0.5) {
        const r = (x) => [x.left, x.top, x.right, x.bottom].map(Math.round).join(',');
        out.push(`${t.textContent} text ${r(b)} shape ${r(s)} textLength=${t.getAttribute("textLength")} ${t.outerHTML.slice(0, 160)}`);
      }
    }
  }
  return out;
}"""

SMALLEST_LABEL_PX = """() => {
  let smallest = Infinity;
  for (const t of document.querySelectorAll('.fxviz-graph g.node text')) {
    if (t.closest('.fxviz-marker')) continue;
    const size = Number(t.getAttribute('font-size')) * t.getScreenCTM().a;
    smallest = Math.min(smallest, size);
  }
  return smallest;
}"""

SHOWN = """(el) => {
  if (!el || !el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) return false;
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  let node = el;
  while (node && node.nodeType === 1) {
    const s = getComputedStyle(node);
    if (s.display === 'none' || s.visibility === 'hidden' || Number(s.opacity) === 0) return false;
    node = node.parentNode;
  }
  return style.display !== 'none' && box.width > 0 && box.height > 0;
}"""


def shown(locator) -> bool:
    """The element is rendered: displayed, visible, opaque up its ancestors, non-zero box."""
    return bool(locator.evaluate(SHOWN))


def node(page, name: str):
    """The drawn node whose title is ``name``."""
    return page.locator(".fxviz-graph g.node").filter(has=page.locator(f"title:text-is('{name}')"))


def outline_style(locator) -> dict:
    """Computed stroke, fill and filter of a node's outline."""
    return locator.evaluate(
        """(g) => { const s = getComputedStyle(g.querySelector('polygon, ellipse, path'));
        return { stroke: s.stroke, fill: s.fill, width: parseFloat(s.strokeWidth),
                 filter: getComputedStyle(g).filter }; }"""
    )


# Inspector keys and values squeezed narrower than their text (or 40 px, for long text):
# a long key must not squeeze its value into one letter a line, nor be squeezed itself.
INSPECTOR_SQUEEZED = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  return [...document.querySelectorAll('.fxviz-inspector dt, .fxviz-inspector dd')].filter((e) => {
    ctx.font = getComputedStyle(e).font;
    const natural = ctx.measureText(e.textContent).width;
    return e.getBoundingClientRect().width < Math.min(natural, 40) - 1;
  }).map((e) => e.textContent);
}"""


# Where the inspector's text (its title, fields and value preview) wraps to a new line other than after a space, "_", ".", ",",
# "/" or "-": names cut mid-word ("transformer_h_2_ln_|1_weight" is fine, "transfo|rmer" not).
INSPECTOR_MID_WORD_BREAKS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('.fxviz-inspector :is(.fxviz-title, dt, dd, .fxviz-preview)')) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const chars = [];
    for (let t = walker.nextNode(); t; t = walker.nextNode())
      for (let i = 0; i < t.data.length; i++) chars.push([t, i]);
    const range = document.createRange();
    let last = null;
    chars.forEach(([t, i], k) => {
      range.setStart(t, i); range.setEnd(t, i + 1);
      const r = range.getClientRects()[0];
      if (!r) return;
      if (last && r.top > last.top + 2) {
        const before = chars[k - 1][0].data[chars[k - 1][1]];
        const ahead = k > 1 ? chars[k - 2][0].data[chars[k - 2][1]] : "";
        const inNumber = before === "." && /\\d/.test(ahead) && /\\d/.test(t.data[i]);
        if ((inNumber || !/[\\s_.,/\\-]/.test(before)) && /\\S/.test(t.data[i]))
          out.push(`${el.textContent}: breaks after "${before}"`);
      }
      last = r;
    });
  }
  return out;
}"""

# Contrast ratio (WCAG) of an element's text against the first opaque background behind
# it; for SVG text, its fill against the node's fill (a label) or the graph's page.
CONTRAST = """(el) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92
    : ((v + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  let bg = null;
  const start = el instanceof SVGElement ? el.closest('.fxviz-graph') : el; // the graph's page
  for (let n = start; n && n.nodeType === 1; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) { bg = c; break; }
  }
  bg ??= [255, 255, 255];
  const shape = el instanceof SVGElement && el.closest('g.node')?.querySelector('path, polygon, ellipse');
  if (shape) { // a node's label sits on the node's fill, as faded as the node is
    const s = getComputedStyle(shape);
    const a = Number(s.fillOpacity) * Number(s.opacity);
    bg = rgb(s.fill).slice(0, 3).map((v, i) => v * a + bg[i] * (1 - a));
  }
  const style = getComputedStyle(el);
  const fg = rgb(el instanceof SVGElement ? style.fill : style.color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""

# The smallest gap, in CSS px, between an element's text and the inside of its border.
TEXT_CLEARANCE = """(el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const t = range.getBoundingClientRect(), b = el.getBoundingClientRect(), s = getComputedStyle(el);
  const w = (side) => parseFloat(s[`border${side}Width`]) || 0;
  return Math.min(t.left - b.left - w('Left'), t.top - b.top - w('Top'),
                  b.right - w('Right') - t.right, b.bottom - w('Bottom') - t.bottom);
}"""


def contrast(locator) -> float:
    """WCAG contrast ratio of the element's text with what is behind it (4.5: readable)."""
    return float(locator.evaluate(CONTRAST))


def text_clearance(locator) -> float:
    """The smallest gap between the element's text and its box's inner edge, in CSS px."""
    return float(locator.evaluate(TEXT_CLEARANCE))


@pytest.fixture
def offline(browser):
    """A page with the network off; every request other than file:// is recorded."""
    requests: list[str] = []
    browser.set_offline(True)
    page = browser.new_page()
    page.on(
        "request",
        lambda r: None if r.url.startswith(("file:", "blob:", "data:")) else requests.append(r.url),
    )
    yield page, requests
    page.close()
    browser.set_offline(False)


# Node labels closer than 2 CSS px to their face's left or right edge (a box3d's face
# is its outline less the depth its three polylines draw), outside it top or bottom, or
# crossing a method's corner diagonals (its four polylines).
LABELS_CRAMPED = """() => {
  const out = [];
  for (const g of document.querySelectorAll('.fxviz-graph g.node')) {
    const shape = g.querySelector('polygon, ellipse, path');
    if (!shape) continue;
    const s = shape.getBoundingClientRect();
    let right = s.right;
    const lines = [...g.querySelectorAll('polyline')];
    if (lines.length === 3) right = Math.min(...lines.map((l) => l.getBoundingClientRect().right));
    for (const t of g.querySelectorAll('text')) {
      if (t.closest('.fxviz-marker') || !t.textContent.trim()) continue;
      const b = t.getBoundingClientRect();
      const gap = Math.min(b.left - s.left, right - b.right);
      if (gap < 2 || b.top < s.top - 0.5 || b.bottom > s.bottom + 0.5) {
        out.push(`${t.textContent}: ${gap.toFixed(1)} px from the edge`);
      }
      // a corner's diagonal cuts off the triangle between it and the shape's corner: the
      // text's own corner nearest it must stay on the inner side (1 px of slack)
      const corners = lines.length === 4 ? lines.map((l) => l.getBoundingClientRect()) : [];
      const crossed = corners.some((c) => {
        const size = c.right - c.left;
        const left = c.left - s.left < 1, top = c.top - s.top < 1;
        const dx = left ? b.left - s.left : s.right - b.right;
        const dy = top ? b.top - s.top : s.bottom - b.bottom;
        const ink = 0.25 * (b.bottom - b.top); // the em box's space above and below the glyphs
        return dx >= -1 && dx < size && dy + ink + dx < size - 1;
      });
      if (crossed) out.push(`${t.textContent}: across a corner diagonal`);
    }
  }
  return out;
}"""

# What the opening view shows of the model: its topmost node that reads an input (where
# the data enters; else its topmost node that is not an input: a node reading none, as an
# exported graph's unused ``arange`` chain, may be drawn as high), of several on that
# rank the one nearest the cursor across, and the debugger's cursor (the current node),
# each inside the graph panel.
OPENING = """() => {
  const panel = document.querySelector('.fxviz-graph').getBoundingClientRect();
  const inside = (g) => { const r = g.getBoundingClientRect();
    return r.width > 0 && r.left >= panel.left - 1 && r.right <= panel.right + 1
      && r.top >= panel.top - 1 && r.bottom <= panel.bottom + 1; };
  const all = [...document.querySelectorAll('.fxviz-graph g.node')];
  const title = (g) => g.querySelector('title').textContent;
  const inputs = new Set(all.filter((g) => g.classList.contains('kind-placeholder')).map(title));
  const fed = new Set([...document.querySelectorAll('.fxviz-graph g.edge > title')]
    .map((t) => t.textContent.split('->').map((end) => end.split(':')[0]))
    .filter(([tail]) => inputs.has(tail)).map(([, head]) => head));
  const model = all.filter((g) => !inputs.has(title(g)));
  const nodes = model.some((g) => fed.has(title(g))) ? model.filter((g) => fed.has(title(g))) : model;
  const centre = (g) => { const r = g.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
  const high = Math.min(...nodes.map((g) => centre(g)[1]));
  const rank = nodes.filter((g) => centre(g)[1] <= high + 2);
  const current = document.querySelector('.fxviz-graph g.fxviz-current');
  const across = (g) => (current ? Math.abs(centre(g)[0] - centre(current)[0]) : 0);
  const top = rank.reduce((a, b) => (across(b) < across(a) ? b : a));
  return { top: top.querySelector('title').textContent, topShown: inside(top),
           current: current?.querySelector('title').textContent ?? null,
           currentShown: !!current && inside(current),
           currentIsInput: !!current && current.classList.contains('kind-placeholder') };
}"""

# Names of the machinery of a one-graph Dynamo capture shown on the page: a "graph 0"
# frame, or a g0_ prefix on a node's name or label.
CAPTURE_MACHINERY = """() => {
  const found = [];
  for (const t of document.querySelectorAll('.fxviz-graph g.cluster text'))
    if (/graph \\d+ \\(dynamo\\)|^g\\d+[.]/.test(t.textContent)) found.push(t.textContent);
  for (const t of document.querySelectorAll('.fxviz-graph g.node :is(title, text)'))
    if (/^g\\d+_/.test(t.textContent.trim())) found.push(t.textContent);
  return found;
}"""
