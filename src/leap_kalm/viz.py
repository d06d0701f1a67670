"""The kedro-viz site: serve it on 127.0.0.1, render it in headless Chromium, screenshot it.

``kedro viz build`` writes a static site (``build/``) whose page is drawn by JavaScript, so
checking the files says nothing about what a person sees. This module serves the site on
the loopback interface only and has Debian's ``chromium`` load it headless, returning the
DOM after the scripts ran (node names are SVG text there) or a PNG of the page.

    python -m leap_kalm.viz serve [--site build] [--port 4141]
    python -m leap_kalm.viz screenshot --pipeline leap_iter --out docs/leap_iter_dag.png
    python -m leap_kalm.viz check --pipeline leap_iter      # node names present on the page?
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

HOST = "127.0.0.1"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = "install Debian's chromium (sudo apt-get install chromium)"


def find_chromium() -> str | None:
    """The path of a Chromium binary on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _check_site(site: Path) -> Path:
    site = Path(site)
    if not (site / "index.html").is_file():
        raise FileNotFoundError(
            f"{site}/index.html does not exist: build the site first (make viz)"
        )
    return site


# A page of our own on the site's origin: it switches kedro-viz's feature-hint tour off
# (a setting kept in the origin's localStorage) and goes on to the page asked for.
QUIET_PATH = "/__leap_kalm_quiet"
_QUIET_PAGE = """<!doctype html><script>
localStorage.setItem("KedroViz", JSON.stringify({showFeatureHints: false}));
location.replace("/" + location.search);
</script>"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == QUIET_PATH:
            body = _QUIET_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass


@contextlib.contextmanager
def serving(site: str | Path, port: int = 0) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 (``port`` 0: any free port) in a thread; yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(_check_site(Path(site))))
    server = http.server.ThreadingHTTPServer((HOST, port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def page_url(base: str, pipeline: str | None = None) -> str:
    """The site's URL showing ``pipeline`` (kedro-viz's ``pid`` parameter), namespaces
    expanded, reached through the page that switches the feature-hint tour off."""
    query = {"pid": pipeline, "expandAllPipelines": "true"} if pipeline else {}
    return base.rstrip("/") + QUIET_PATH + ("?" + urlencode(query) if query else "")


def _chromium(args: list[str], budget_ms: int, timeout: int) -> subprocess.CompletedProcess:
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError(
            f"no Chromium on PATH ({', '.join(CHROMIUM_NAMES)}): {INSTALL_HINT}"
        )
    with tempfile.TemporaryDirectory(prefix="leap_kalm_chromium_") as profile:
        command = [
            binary,
            "--headless=new",
            "--no-sandbox",  # CI containers run as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            *args,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited with {result.returncode}: {result.stderr[-2000:]}")
    return result


def rendered_dom(url: str, budget_ms: int = 15_000, timeout: int = 120) -> str:
    """The page's DOM after its scripts ran for ``budget_ms`` of virtual time."""
    return _chromium(["--dump-dom", url], budget_ms, timeout).stdout


def screenshot(
    url: str, out: str | Path, size: tuple[int, int] = (1300, 1600), budget_ms: int = 15_000
) -> Path:
    """A PNG of the rendered page at ``size`` (width, height)."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    _chromium(
        [f"--window-size={size[0]},{size[1]}", f"--screenshot={out}", url], budget_ms, timeout=120
    )
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    return out


def missing_names(dom: str, names: list[str]) -> list[str]:
    """The ``names`` that do not appear as text of the rendered DOM."""
    return [name for name in names if f">{name}<" not in dom]


def pipeline_node_names(site: str | Path, pipeline: str) -> list[str]:
    """The short names of ``pipeline``'s nodes, read from the built site's API file."""
    import json

    path = _check_site(Path(site)) / "api" / "pipelines" / pipeline
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: no pipeline {pipeline!r} in the site")
    graph = json.loads(path.read_text(encoding="utf-8"))
    return sorted({n["name"].rsplit(".", 1)[-1] for n in graph["nodes"] if n.get("type") == "task"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leap_kalm.viz", description=__doc__)
    parser.add_argument("command", choices=("serve", "screenshot", "check"))
    parser.add_argument("--site", default="build")
    parser.add_argument("--port", type=int, default=4141)
    parser.add_argument("--pipeline", default="leap_iter")
    parser.add_argument("--out", default="docs/leap_iter_dag.png")
    args = parser.parse_args(argv)
    if args.command == "serve":
        with serving(args.site, args.port) as url:
            print(f"kedro-viz site on {page_url(url, args.pipeline)} (Ctrl-C stops it)")
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
        return 0
    with serving(args.site) as url:
        if args.command == "screenshot":
            print(screenshot(page_url(url, args.pipeline), args.out))
            return 0
        names = pipeline_node_names(args.site, args.pipeline)
        missing = missing_names(rendered_dom(page_url(url, args.pipeline)), names)
    if missing:
        print(f"{args.pipeline}: not on the rendered page: {', '.join(missing)}")
        return 1
    print(f"{args.pipeline}: all {len(names)} node names are on the rendered page")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
