"""The web console served by ``horus serve`` at ``/`` (same process, port and credentials as the API).

Plain HTML pages with one small script and one stylesheet shipped in the package
(``horus/service/console_static``): no framework, no build step, no CDN. Each page is a static
shell; the script fetches the same JSON the API serves (``/v1/cluster``, ``/v1/jobs``,
``/v1/jobs/{id}``, ``/v1/colocations``) and re-renders every ``POLL_MS`` milliseconds, building
DOM nodes with ``textContent`` only (no user text ever becomes HTML). Why no framework: the pages
are four tables and a grid; 12 KiB of script is smaller than any framework, keeps the tests about
behaviour, and ships in the wheel as is.

Sign-in takes a token (a user's, or the admin token file's) and opens a session: an HttpOnly,
SameSite=Strict cookie (``horus.service.auth.Sessions``). What a session may see and do is what
its token may (a user: its own jobs, cancel them; admin: everything).
"""

from __future__ import annotations

from importlib import resources
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from horus.service.auth import SESSION_COOKIE, SESSION_TTL_S, Authenticator, Sessions

POLL_MS = 1500
PAGES = {"/": ("cluster", "Cluster"), "/queue": ("queue", "Queue"), "/ledger": ("ledger", "Co-location ledger")}
_STATIC = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}


def _asset(name: str) -> str:
    return resources.files("horus.service").joinpath("console_static", name).read_text(encoding="utf-8")


def _page(kind: str, title: str, job_id: int | None = None) -> HTMLResponse:
    data = f' data-job="{int(job_id)}"' if job_id is not None else ""
    nav = "".join(f'<a href="{path}" data-nav="{k}">{t}</a>' for path, (k, t) in PAGES.items())
    html = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Horus - {title}</title><link rel="stylesheet" href="/console/static/console.css"></head>
<body data-page="{kind}" data-poll="{POLL_MS}"{data}>
<header><a class="brand" href="/">Horus</a><nav>{nav}</nav><span id="who"></span>
<form method="post" action="/logout"><button type="submit" id="logout">Sign out</button></form></header>
<main id="app"><p class="muted" id="loading">Loading...</p></main>
<footer><span id="updated"></span></footer>
<script src="/console/static/console.js"></script></body></html>"""
    return HTMLResponse(html, headers=_SECURITY_HEADERS)


def _login_page(message: str = "", status: int = 200) -> HTMLResponse:
    note = f'<p class="error" id="login-error">{message}</p>' if message else ""
    html = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Horus - sign in</title>
<link rel="stylesheet" href="/console/static/console.css"></head>
<body class="login"><main><h1>Horus</h1>
<form method="post" action="/login"><label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required maxlength="512">
<button type="submit" id="sign-in">Sign in</button></form>{note}
<p class="muted">Use your user token (<code>horus token create --role user --name NAME</code>) or the admin token
(<code>&lt;state dir&gt;/token</code>).</p></main></body></html>"""
    return HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)


def mount_console(app: FastAPI, auth: Authenticator, sessions: Sessions) -> None:
    """Add the console's pages, sign-in and assets to ``app``."""

    def signed_in(request: Request) -> bool:
        token = sessions.token(request.cookies.get(SESSION_COOKIE))
        return token is not None and auth.identify(token) is not None

    def shell(kind: str, title: str, request: Request, job_id: int | None = None) -> Response:
        if not signed_in(request):
            return RedirectResponse("/login", status_code=303)
        return _page(kind, title, job_id)

    for path, (kind, title) in PAGES.items():
        def view(request: Request, kind: str = kind, title: str = title) -> Response:
            return shell(kind, title, request)

        app.add_api_route(path, view, methods=["GET"], include_in_schema=False, response_class=HTMLResponse)

    @app.get("/jobs/{job_id}", include_in_schema=False, response_class=HTMLResponse)
    def job_page(request: Request, job_id: int) -> Response:
        if not 1 <= job_id <= 2**62:
            return HTMLResponse("no such job", status_code=404)
        return shell("job", f"job {job_id}", request, job_id)

    @app.get("/login", include_in_schema=False, response_class=HTMLResponse)
    def login_form() -> Response:
        return _login_page()

    @app.post("/login", include_in_schema=False, response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        data = await request.body()  # a urlencoded form with one field (no multipart dependency for that)
        token = parse_qs(data[:2048].decode("utf-8", "replace")).get("token", [""])[0]
        who = auth.identify(token) if 0 < len(token) <= 512 else None
        if who is None or who.role == "agent":
            return _login_page("wrong token" if who is None else "an agent token cannot sign in", status=403)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, sessions.open(token), max_age=int(SESSION_TTL_S), httponly=True,
                            samesite="strict", secure=request.url.scheme == "https", path="/")
        return response

    @app.post("/logout", include_in_schema=False)
    def logout(request: Request) -> Response:
        sessions.close(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    @app.get("/console/static/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        if name not in _STATIC:
            return Response("not found", status_code=404)
        return Response(_asset(name), media_type=_STATIC[name],
                        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"})
