"""Screenshots of every page (docs/screenshots/*.png) against a demo-populated server.

    .venv/bin/python docs/screenshots/take.py [--data-dir DIR]

Runs ``trustscore demo`` into DIR (a fresh temporary directory by default; an existing demo directory
is reused as it is), serves it with a rating snapshot every two seconds until the best agent has a few
snapshots, and photographs each page in the system's headless Chromium (/usr/bin/chromium, driven by
Playwright; nothing is downloaded). The in-page verification is run before the entry page is taken.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("TRUSTSCORE_CHROMIUM", "/usr/bin/chromium")
TRUSTSCORE = [sys.executable, "-m", "trustscore.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait(url: str, ok: object, limit: float = 120) -> httpx.Response:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            r = httpx.get(url, timeout=5)
            if callable(ok) and ok(r):
                return r
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {url}")


def shoot(url: str, out: Path) -> None:
    board = httpx.get(url + "/v1/leaderboard", timeout=10).json()
    best = board["ranked"][0]["agent"]
    wait(f"{url}/v1/agents/{best}/rating/history", lambda r: len(r.json()["points"]) >= 4)
    entry = httpx.get(f"{url}/v1/agents/{best}/evidence?limit=1", timeout=10).json()["items"][0]["index"]
    pages = {
        "home": "/",
        "leaderboard": "/leaderboard",
        "agent": f"/agents/{best}",
        "log": "/log",
        "entry": f"/log/entries/{entry}",
        "methodology": "/methodology",
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        for name, path in pages.items():
            page.goto(url + path)
            if name == "entry":
                page.click("#verify-button")
                page.wait_for_selector("#verify-result[data-outcome=verified]")
            shot = str(out / f"{name}.png")
            if name in ("methodology", "agent", "entry"):  # the long pages: the first 1800 pixels
                page.screenshot(
                    path=shot, full_page=True, clip={"x": 0, "y": 0, "width": 1200, "height": 1800}
                )
            else:
                page.screenshot(path=shot, full_page=True)
            print(f"{name}: {out / f'{name}.png'}")
        browser.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, help="a demo data directory (made by `trustscore demo` if empty)")
    p.add_argument("--out", type=Path, default=HERE)
    args = p.parse_args()
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="trustscore-shots-"))
    if not (data / "log.key").exists():
        demo = [*TRUSTSCORE, "demo", "--data-dir", str(data)]
        subprocess.run(demo, check=True, stdout=subprocess.DEVNULL)  # noqa: S603 - our own CLI
    port = free_port()
    env = {**os.environ, "TRUSTSCORE_SNAPSHOT_INTERVAL": "2"}
    argv = [*TRUSTSCORE, "serve", "--data-dir", str(data), "--port", str(port)]
    with subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as server:  # noqa: S603
        try:
            url = f"http://127.0.0.1:{port}"
            wait(url + "/readyz", lambda r: r.status_code == 200)
            shoot(url, args.out)
        finally:
            server.terminate()
            server.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
