"""Bad input to the live-service CLI (``serve``, ``agent``, ``submit``, ``jobs``, ``job``, ``cancel``, ``top``,
``token``) ends in one line and exit 2 before anything is written (issue 28: found by benchmarks/fuzz_inputs.py).

Commands that would start a server or an agent if a check were missing run as real subprocesses with a timeout;
the others run in-process through ``horus.cli.main``. ``http://127.0.0.1:9`` is a server nobody answers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from horus.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"
UNREACHABLE = "http://127.0.0.1:9"
LONG_URL = "http://" + "a" * 5000 + ":9"
HUGE = str(2**70)


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """(exit code, stderr lines) of ``horus ARGV`` in this process (argparse's usage errors exit 2)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err.strip().splitlines()


def _horus(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **(env or {}),
               "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "horus.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=environ, check=False)


def _one_line(result: subprocess.CompletedProcess[str], option: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"horus: error: {option}: "), result.stderr[-2000:]


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("t" * 40 + "\n")
    return path


# ---- --server URLs and job ids -----------------------------------------------------------------------------------
BAD_URLS = [LONG_URL, "http://127.0.0.1:9/\x01", "http://127.0.0.1\x7f:9", "http://127.0.0.1:99999",
            "http://127.0.0.1:0", "ftp://127.0.0.1:9", "127.0.0.1:9", "http://", "http://a,b,,:9",
            "http://user:pw@127.0.0.1:9", "http://127.0.0.1:9/?x=1", "http://[::1:9", "http://" + "a" * 64 + ".b",
            "http://héllo:9"]


@pytest.mark.parametrize("url", BAD_URLS)
@pytest.mark.parametrize("command", [["job", "1"], ["cancel", "1"], ["jobs"], ["top", "--once"],
                                     ["submit", "--", "true"]])
def test_bad_server_url_is_a_usage_error(command: list[str], url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main([*command[:1], "--server", url, *command[1:]], capsys)
    assert code == 2 and err[-1].startswith(f"horus {command[0]}: error: argument --server: "), err
    assert "Traceback" not in "\n".join(err)


@pytest.mark.parametrize("url", [LONG_URL, "http://127.0.0.1:9/\x01"])
def test_bad_server_url_of_the_agent_is_a_usage_error(url: str, token_file: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["agent", "--server", url, "--token-file", str(token_file), "--fake-gpus", "1"], capsys)
    assert code == 2 and err[-1].startswith("horus agent: error: argument --server: "), err


def test_bad_server_from_the_environment_names_it(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HORUS_SERVER", "http://127.0.0.1:9/\x01")
    code, err = _main(["jobs"], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("horus: error: $HORUS_SERVER: "), err


def test_good_server_url_reaches_the_network_step(capsys: pytest.CaptureFixture[str]) -> None:
    """A valid URL passes the checks: the error is then that nobody answers there."""
    code, err = _main(["job", "1", "--server", UNREACHABLE + "/"], capsys)
    assert code == 2 and err == [(f"horus: error: --server: cannot reach the Horus server at {UNREACHABLE} "
                                  "(ConnectError); is `horus serve` running?")]


@pytest.mark.parametrize("job_id", ["1\x01", "0", "-1", HUGE, "1e30", "nan", "abc", "1/../../v1/cluster", ""])
@pytest.mark.parametrize("command", ["job", "cancel"])
def test_bad_job_id_is_a_usage_error(command: str, job_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main([command, job_id, "--server", UNREACHABLE], capsys)
    assert code == 2 and err[-1].startswith(f"horus {command}: error: argument job_id: expected an integer in [1, "), err


# ---- numeric options ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", HUGE, "-" + HUGE, "1e30", "inf"])
@pytest.mark.parametrize("argv,option", [
    (["top", "--once", "--interval"], "--interval"), (["jobs", "--before"], "--before"), (["jobs", "--limit"], "--limit"),
    (["submit", "--gpus"], "--gpus"),
])
def test_numbers_outside_their_domain_are_usage_errors(argv: list[str], option: str, value: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main([*argv, value, "--server", UNREACHABLE], capsys)
    assert code == 2 and f"argument {option}: expected " in err[-1], err


@pytest.mark.parametrize("value", ["nan", HUGE, "-" + HUGE, "1e30"])
def test_agent_fake_gpus_outside_their_domain_is_a_usage_error(value: str, token_file: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["agent", "--server", UNREACHABLE, "--token-file", str(token_file), "--fake-gpus", value], capsys)
    assert code == 2 and "argument --fake-gpus: expected an integer in [0, 1,024]" in err[-1], err


# ---- the agent: its name and work directory, checked before it joins ---------------------------------------------
@pytest.mark.parametrize("argv,option", [
    (["--name", "../escape"], "--name"), (["--name", "a/b"], "--name"), (["--name", "x" * 300], "--name"),
    (["--workdir", "/dev/null"], "--workdir"), (["--workdir", "/proc/horus-agent"], "--workdir"),
    (["--workdir", "/tmp/" + "w" * 5000], "--workdir"),
])
def test_agent_bad_name_or_workdir_fails_before_joining(argv: list[str], option: str, token_file: Path,
                                                        tmp_path: Path) -> None:
    result = _horus("agent", "--server", UNREACHABLE, "--token-file", str(token_file), "--fake-gpus", "1",
                    "--workdir", str(tmp_path / "work"), *argv, env={"HORUS_STATE_DIR": str(tmp_path / "state")},
                    timeout=30)
    _one_line(result, option)
    assert not (tmp_path / "work").exists() and not (tmp_path / "escape").exists()


# ---- horus token: state directory and --out ----------------------------------------------------------------------
@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    from horus.service.store import Store

    state = tmp_path / "state"
    state.mkdir()
    Store(state / "horus.db").close()
    return state


def _token_names(state: Path) -> list[str]:
    from horus.service.store import Store

    store = Store(state / "horus.db")
    try:
        return [row["name"] for row in store.tokens()]
    finally:
        store.close()


@pytest.mark.parametrize("action", [["create", "--name", "alice", "--role", "user"], ["list"], ["revoke", "alice"]])
def test_token_commands_refuse_a_state_dir_name_too_long(action: list[str], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["token", *action, "--state-dir", str(tmp_path / ("s" * 5000))], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("horus: error: --state-dir: "), err


@pytest.mark.parametrize("out", ["/proc/horus-token", "{file}/sub", "{dir}/missing/deeper/x", "{file}", "{dir}",
                                 "{dir}/" + "o" * 5000])
def test_token_create_refuses_an_unwritable_out_and_creates_no_token(out: str, state_dir: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("keep\n")
    (tmp_path / "a-dir").mkdir()
    path = out.format(file=tmp_path / "a-file", dir=tmp_path / "a-dir")
    code, err = _main(["token", "create", "--name", "alice", "--role", "user", "--state-dir", str(state_dir),
                       "--out", path], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("horus: error: --out: "), err
    assert _token_names(state_dir) == []  # no credential nobody holds
    assert (tmp_path / "a-file").read_text() == "keep\n" and list((tmp_path / "a-dir").iterdir()) == []


def test_token_create_with_a_bad_name_leaves_no_out_file(state_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["token", "create", "--name", "../x", "--role", "user", "--state-dir", str(state_dir),
                       "--out", str(tmp_path / "tok")], capsys)
    assert code == 2 and err[0].startswith("horus: error: --name: ")
    assert not (tmp_path / "tok").exists()


def test_token_create_writes_out(state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["token", "create", "--name", "alice", "--role", "user", "--state-dir", str(state_dir),
                       "--out", str(tmp_path / "tok")], capsys)
    assert code == 0, err
    assert len((tmp_path / "tok").read_text().strip()) >= 32 and (tmp_path / "tok").stat().st_mode & 0o777 == 0o600
    assert _token_names(state_dir) == ["alice"]


# ---- horus serve: state directory, address, token file, checked before anything is written -----------------------
def _busy_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.mark.parametrize("argv,option", [
    (["--state-dir", "/dev/null"], "--state-dir"),
    (["--state-dir", "{file}"], "--state-dir"),
    (["--state-dir", "{file}/sub"], "--state-dir"),
    (["--state-dir", "/tmp/" + "s" * 5000], "--state-dir"),
    (["--host", "a,b,,"], "--host"),
    (["--host", "horus-no-such-host.invalid"], "--host"),
    (["--host", "192.0.2.1"], "--host"),  # TEST-NET-1: an address of no machine here
    (["--host", ""], "--host"),
    (["--token-file", "{file}"], "{file}"),  # 5 characters: too short for a token
    (["--agent-name", "../x"], "--agent-name"),
])
def test_serve_bad_input_fails_before_writing(argv: list[str], option: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("short\n")
    argv = [a.format(file=tmp_path / "a-file") for a in argv]
    state = ["--state-dir", str(tmp_path / "state")] if "--state-dir" not in argv else []
    result = _horus("serve", "--fake-gpus", "1", *state, *argv)
    _one_line(result, option.format(file=tmp_path / "a-file"))
    assert not (tmp_path / "state").exists()
    assert (tmp_path / "a-file").read_text() == "short\n"


def test_serve_on_a_busy_port_names_the_port(tmp_path: Path) -> None:
    with _busy_port() as busy:
        result = _horus("serve", "--fake-gpus", "1", "--state-dir", str(tmp_path / "state"), "--port",
                        str(busy.getsockname()[1]))
    _one_line(result, "--port")
    assert not (tmp_path / "state").exists()


# ---- submit --onnx ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["{dir}", "{dir}/missing.onnx"])
def test_submit_onnx_that_is_no_file_is_one_line(path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["submit", "--server", UNREACHABLE, "--onnx", path.format(dir=tmp_path), "--", "true"], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith(f"horus: error: {path.format(dir=tmp_path)}: "), err
