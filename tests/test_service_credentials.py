"""Credentials and secrets of the live service, with real `horus serve` / `horus agent` processes.

* a join token lets a machine obtain its own agent credential once, and nothing else;
* ``secret_env`` values reach the job and no read (job, listing, brief listing) returns them;
* the state directory is the server's user's only (0700; store and job logs 0600);
* with ``--run-as`` (root only) a job cannot read the server's token, job secret or store, and still reports
  progress and checkpoints.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from service_helpers import Server, kill_job_processes, wait_for


def _horus(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "horus.cli", *args], capture_output=True, text=True, timeout=60,
                          env=env, check=False)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_join_token_gives_a_machine_its_own_credential_once(tmp_path: Path) -> None:
    server = Server(tmp_path / "state", "--no-agent", fake_gpus=0).start()
    agent = None
    try:
        made = _horus("token", "create", "--role", "join", "--name", "rack-7", "--state-dir", str(server.state_dir),
                      "--out", str(tmp_path / "join"))
        assert made.returncode == 0, made.stderr
        join = (tmp_path / "join").read_text().strip()
        with server.client(join) as as_join:  # a join token does nothing but join
            assert as_join.get("/v1/jobs").status_code == 403
            assert as_join.post("/v1/jobs", json={"command": ["true"]}).status_code == 403
            assert as_join.post("/v1/agents", json={"name": "n1", "hostname": "h", "gpus": []}).status_code == 403
        agent = subprocess.Popen([sys.executable, "-m", "horus.cli", "agent", "--server", server.url,
                                  "--join-token-file", str(tmp_path / "join"), "--name", "n1", "--workdir",
                                  str(tmp_path / "n1"), "--fake-gpus", "1", "--heartbeat-s", "0.2"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        with server.client() as api:
            wait_for(lambda: len(api.get("/v1/cluster").json()["gpus"]) == 1, what="n1 to join")
            credential = tmp_path / "n1" / "credential"
            assert _mode(credential) == 0o600
            own = credential.read_text().strip()
            assert own != join
            listed = _horus("token", "list", "--state-dir", str(server.state_dir)).stdout
            assert "n1" in listed and "agent" in listed
            with server.client(own) as as_agent:  # bound to its name
                assert as_agent.post("/v1/agents/n2/heartbeat", json={"reports": []}).status_code == 403
                assert as_agent.get("/v1/jobs").status_code == 403
            with server.client(join) as as_join:  # the name has a credential: no second one, no takeover
                again = as_join.post("/v1/agents/join", json={"name": "n1"})
                assert again.status_code == 409 and "revoke" in again.json()["detail"]
                assert as_join.post("/v1/agents/join", json={"name": "../x"}).status_code == 422
            agent.kill()
            agent.wait(10)
            agent = subprocess.Popen([sys.executable, "-m", "horus.cli", "agent", "--server", server.url,
                                      "--join-token-file", str(tmp_path / "join"), "--name", "n1", "--workdir",
                                      str(tmp_path / "n1"), "--fake-gpus", "1", "--heartbeat-s", "0.2"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wait_for(lambda: api.get("/v1/cluster").json()["agents"][0]["last_seen_s_ago"] < 0.5,
                     what="n1 back with its stored credential")
            assert agent.poll() is None
            other = _horus("agent", "--server", server.url, "--join-token-file", str(tmp_path / "join"), "--name",
                           "n1", "--workdir", str(tmp_path / "elsewhere"), "--fake-gpus", "1")
            assert other.returncode == 2 and "refused to let 'n1' join: HTTP 409" in other.stderr
            assert len(other.stderr.strip().splitlines()) == 1
    finally:
        if agent is not None:
            agent.kill()
            agent.wait(10)
        server.stop()


def test_secret_env_reaches_the_job_and_no_read_returns_it(tmp_path: Path) -> None:
    server = Server(tmp_path / "state", fake_gpus=1).start()
    secret = "s3cr3t-value-7f1e"
    out = tmp_path / "seen"
    try:
        env = {**os.environ, "HORUS_SERVER": server.url, "HORUS_TOKEN": server.token, "DB_PASSWORD": secret}
        made = _horus("submit", "--secret-env", "DB_PASSWORD", "--env", "PLAIN=visible", "--json", "--",
                      "sh", "-c", f'printf %s "$DB_PASSWORD" > {out}', env=env)
        assert made.returncode == 0, made.stderr
        assert secret not in made.stdout
        missing = _horus("submit", "--secret-env", "NOT_SET_ANYWHERE", "--", "true", env=env)
        assert missing.returncode == 2 and "--secret-env" in missing.stderr
        with server.client() as api:
            job_id = [j for j in api.get("/v1/jobs").json()["jobs"]][0]["id"]
            wait_for(lambda: api.get(f"/v1/jobs/{job_id}").json()["state"] == "finished", what="the job")
            assert out.read_text() == secret
            for path in (f"/v1/jobs/{job_id}", "/v1/jobs", "/v1/jobs?brief=true", "/v1/cluster"):
                text = api.get(path).text
                assert secret not in text, path
            view = api.get(f"/v1/jobs/{job_id}").json()
            assert view["env"] == {"PLAIN": "visible", "DB_PASSWORD": "(secret)"}
            clash = api.post("/v1/jobs", json={"command": ["true"], "env": {"A": "1"}, "secret_env": {"A": "2"}})
            assert clash.status_code == 409
        assert secret not in _horus("job", job_id, "--json", env=env).stdout
        state = server.state_dir
        assert _mode(state) == 0o700
        assert _mode(state / "horus.db") == 0o600 and _mode(state / "token") == 0o600
        assert _mode(state / "job_secret") == 0o600
        logs = list(state.glob("agent/*/jobs/*/*/log"))
        assert logs and all(_mode(p) == 0o600 for p in logs)
    finally:
        server.stop()
        kill_job_processes(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs root (the server switches the jobs' user)")
def test_run_as_keeps_the_servers_secrets_from_jobs(tmp_path: Path) -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user on this machine")
    base = Path(tempfile.mkdtemp(prefix="horus-run-as-"))  # pytest's own tmp root is 0700: nobody cannot pass
    base.chmod(0o711)  # the job's user reaches its checkpoint folder and progress file through here
    server = Server(base / "state", "--run-as", "nobody", fake_gpus=1).start()
    try:
        with server.client() as api:
            script = ('id -u; cat "$0/job_secret" "$0/token" "$0/horus.db" >/dev/null 2>&1 && echo LEAKED; '
                      'echo saved > "$HORUS_CHECKPOINT_DIR/ckpt" && echo CHECKPOINTED; '
                      'echo \'{"iteration": 5, "time": 1}\' >> "$HORUS_PROGRESS_FILE" && echo REPORTED')
            job = api.post("/v1/jobs", json={"command": ["sh", "-c", script, str(server.state_dir)]}).json()
            done = wait_for(lambda: (j := api.get(f"/v1/jobs/{job['id']}").json())["state"] in ("finished", "failed")
                            and j, what="the job")
        log = done["log_tail"]
        assert done["state"] == "finished", log
        printed = log.splitlines()[1:]  # after the wrapper's start line (which quotes the command)
        assert str(nobody.pw_uid) in printed and "LEAKED" not in printed
        assert "CHECKPOINTED" in printed and "REPORTED" in printed
        assert _mode(server.state_dir) == 0o711
    finally:
        server.stop()
        kill_job_processes(base)
        shutil.rmtree(base, ignore_errors=True)
    refused = _horus("serve", "--state-dir", str(tmp_path / "s2"), "--run-as", "root", "--fake-gpus", "1")
    assert refused.returncode == 2 and "--run-as" in refused.stderr


def test_open_reads_show_jobs_without_their_environment_and_take_no_writes(tmp_path: Path) -> None:
    server = Server(tmp_path / "state", "--open-reads", fake_gpus=1).start()
    try:
        with server.client() as admin, server.client(token=None) as anyone:
            job = admin.post("/v1/jobs", json={"command": ["true"], "env": {"API_URL": "https://internal-9f"}}).json()
            assert admin.get(f"/v1/jobs/{job['id']}").json()["env"] == {"API_URL": "https://internal-9f"}
            seen = anyone.get(f"/v1/jobs/{job['id']}")
            assert seen.status_code == 200 and seen.json()["env"] == {"API_URL": "(hidden)"}
            assert "internal-9f" not in anyone.get("/v1/jobs").text
            assert anyone.post("/v1/jobs", json={"command": ["true"]}).status_code == 401
            assert anyone.post(f"/v1/jobs/{job['id']}/cancel").status_code == 401
    finally:
        server.stop()
        kill_job_processes(tmp_path)
