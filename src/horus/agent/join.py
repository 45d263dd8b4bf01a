"""An agent's own credential, from a join token: ``horus agent --join-token-file F``.

The first start exchanges the join token (role ``join``: it can do nothing else) for a credential of
role ``agent`` bound to this agent's name (``POST /v1/agents/join``), and keeps it in
``<workdir>/credential`` (mode 0600); later starts use that file. The server refuses a second
credential for a name that has one, so a join token cannot take over a machine that already joined
(an admin revokes the old credential first: ``horus token revoke NAME``).
"""

from __future__ import annotations

import os
from pathlib import Path

from horus.errors import HorusInputError

CREDENTIAL_FILE = "credential"


def credential(server_url: str, join_token: str, name: str, workdir: Path, timeout_s: float = 30.0) -> str:
    """This agent's token: read from ``workdir``, or obtained with the join token and written there."""
    path = Path(workdir) / CREDENTIAL_FILE
    if path.exists():
        from horus.validation import read_secret

        return read_secret(path, str(path), hint=": remove the file to join again")
    import httpx

    try:
        response = httpx.post(server_url.rstrip("/") + "/v1/agents/join", json={"name": name}, timeout=timeout_s,
                              headers={"Authorization": f"Bearer {join_token}"})
    except httpx.HTTPError as exc:
        raise HorusInputError("--server", f"cannot reach {server_url} to join ({type(exc).__name__})") from None
    if response.status_code != 200:
        detail = response.text[:300]
        try:
            detail = str(response.json().get("detail", detail))[:300]
        except ValueError:
            pass
        raise HorusInputError("--join-token-file", f"the server refused to let {name!r} join: HTTP "
                                                   f"{response.status_code}: {detail}")
    token = str(response.json()["token"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{CREDENTIAL_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return token
