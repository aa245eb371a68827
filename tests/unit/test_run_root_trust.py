"""The run root is trusted only when it is ours: another user's directory, a directory others
may write, and a link anywhere under it are refused in one line (exit 2), never used or
followed; everything dis-serve writes there is its user's alone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GRAPHS, assert_one_line_error
from dis_serve.errors import UserInputError
from dis_serve.launch.rundir import RunDir, list_runs
from dis_serve.launch.status import GraphPhase, GraphStatus


@pytest.fixture(autouse=True)
def private_umask():
    """The CLI sets a private umask for its process; give it back after each test."""
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


@pytest.fixture
def other_user():
    """A local user made for this test and removed afterwards, also when the test fails."""
    if os.geteuid() != 0 or not Path("/usr/sbin/useradd").exists():
        pytest.skip("needs root and useradd to make another local user")
    name = f"dssec{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        import pwd

        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _status(run: RunDir) -> GraphStatus:
    return GraphStatus(name=run.name, namespace=f"dis-serve-{run.name}", run_dir=str(run.path),
                       endpoint="http://127.0.0.1:1", model_name="m",
                       supervisor_pid=os.getpid(), supervisor_create_time=1.0,
                       phase=GraphPhase.READY, started_at=0.0, processes=[])


def test_a_group_writable_run_root_is_refused_with_its_mode_and_the_fix(run_cli, tmp_path,
                                                                         monkeypatch):
    root = tmp_path / "home"
    root.mkdir()
    root.chmod(0o770)
    monkeypatch.setenv("DIS_SERVE_HOME", str(root))
    result = run_cli("status")
    assert_one_line_error(result, str(root), "writable by others", "mode 0770", "chmod go-w")


def test_a_world_writable_runs_directory_is_refused(tmp_path):
    (tmp_path / "runs").mkdir(mode=0o777)
    (tmp_path / "runs").chmod(0o777)
    with pytest.raises(UserInputError, match="writable by others"):
        RunDir.for_graph("demo", tmp_path)


def test_a_run_root_of_another_user_is_refused_naming_its_owner(run_cli, tmp_path, monkeypatch,
                                                                other_user):
    root = tmp_path / "home"
    (root / "runs" / "demo").mkdir(parents=True)
    os.chown(root, other_user.pw_uid, other_user.pw_gid)
    monkeypatch.setenv("DIS_SERVE_HOME", str(root))
    for command in (["status"], ["down", "demo"], ["logs", "--name", "demo"]):
        result = run_cli(*command)
        assert_one_line_error(result, str(root), f"owned by {other_user.pw_name}",
                              "DIS_SERVE_HOME")


def test_another_users_forged_state_is_not_believed_and_nothing_is_signalled(
        run_cli, tmp_path, monkeypatch, other_user):
    """The issue's attack: a foreign state.json named a pid of ours for `down` to kill."""
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path / "home"))
    run = RunDir.for_graph("demo")
    run.prepare()
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        status = _status(run).model_copy(update={"supervisor_pid": victim.pid})
        run.write_state(status)
        os.chown(run.state_file, other_user.pw_uid, other_user.pw_gid)
        result = run_cli("down", "demo")
        assert_one_line_error(result, str(run.state_file), "not by you")
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_a_previous_link_is_refused_and_its_target_keeps_its_files_and_mode(tmp_path):
    run = RunDir.for_graph("demo", tmp_path / "home")
    run.prepare()
    run.log_file("frontend").write_text("a prompt\n")
    target = tmp_path / "attacker"
    target.mkdir(mode=0o755)
    target.chmod(0o755)
    run.previous.symlink_to(target)
    with pytest.raises(UserInputError, match="symbolic link"):
        run.archive_previous(keep_runs=3)
    assert list(target.iterdir()) == []
    assert _mode(target) == 0o755
    assert run.log_file("frontend").read_text() == "a prompt\n"


def test_a_log_that_is_a_link_is_never_written_through(tmp_path):
    run = RunDir.for_graph("demo", tmp_path / "home")
    run.prepare()
    target = tmp_path / "elsewhere.txt"
    target.write_text("theirs\n")
    run.log_file("frontend").symlink_to(target)
    with pytest.raises(UserInputError, match="symbolic link"):
        run.open_log("frontend")
    assert target.read_text() == "theirs\n"


def test_a_state_file_that_is_a_link_is_refused(tmp_path):
    run = RunDir.for_graph("demo", tmp_path / "home")
    run.prepare()
    elsewhere = tmp_path / "state.json"
    elsewhere.write_text(_status(run).model_dump_json())
    run.state_file.symlink_to(elsewhere)
    with pytest.raises(UserInputError, match="symbolic link"):
        run.read_state()


def test_a_run_directory_that_is_a_link_is_not_listed_or_opened(tmp_path):
    root = tmp_path / "home"
    real = RunDir.for_graph("real", root)
    real.prepare()
    (root / "runs" / "alias").symlink_to(real.path)
    assert [r.name for r in list_runs(root)] == ["real"]
    with pytest.raises(UserInputError, match="symbolic link"):
        RunDir.for_graph("alias", root)


def test_a_new_run_root_and_everything_under_it_is_private(tmp_path):
    os.umask(0o022)
    run = RunDir.for_graph("demo", tmp_path / "home")
    os.close(run.open_log("frontend"))
    run.write_state(_status(run))
    for directory in (tmp_path / "home", tmp_path / "home" / "runs", run.path, run.logs):
        assert _mode(directory) == 0o700, directory
    for file in (run.log_file("frontend"), run.state_file):
        assert _mode(file) == 0o600, file


def test_rotated_logs_are_private_like_the_live_one(tmp_path):
    os.umask(0o022)
    run = RunDir.for_graph("demo", tmp_path / "home")
    fd = run.open_log("frontend")
    os.write(fd, b"x" * 200)
    assert run.rotate_logs(max_bytes=100, backups=3) == ["frontend"]
    os.write(fd, b"y" * 200)
    assert run.rotate_logs(max_bytes=100, backups=3) == ["frontend"]
    os.close(fd)
    rotated = sorted(run.logs.glob("frontend.log.*"))
    assert [p.name for p in rotated] == ["frontend.log.1", "frontend.log.2"]
    assert all(_mode(p) == 0o600 for p in rotated)
    assert (run.logs / "frontend.log.2").read_bytes() == b"x" * 200


def test_archived_runs_stay_private(tmp_path):
    os.umask(0o022)
    run = RunDir.for_graph("demo", tmp_path / "home")
    os.close(run.open_log("frontend"))
    moved = run.archive_previous(keep_runs=3)
    assert moved is not None and (moved / "logs" / "frontend.log").is_file()
    assert _mode(run.previous) == 0o700
    assert _mode(moved) == 0o700


def test_rendered_scripts_are_the_owners_and_set_a_private_umask(run_cli, tmp_path):
    out = tmp_path / "out"
    for graph in ("demo-two-hosts.yaml", "demo-slurm.yaml"):
        result = run_cli("render", str(GRAPHS / graph), "--out", str(out))
        assert result.exit_code == 0, result
    scripts = [*out.rglob("*.sh"), *out.rglob("*.sbatch")]
    assert scripts
    for script in scripts:
        assert _mode(script) == 0o700, script
        assert "\numask 077\n" in script.read_text(), script
    for other in (p for p in out.rglob("*") if p.is_file() and p not in scripts):
        assert _mode(other) == 0o600, other
    for directory in (p for p in out.rglob("*") if p.is_dir()):
        assert _mode(directory) == 0o700, directory
