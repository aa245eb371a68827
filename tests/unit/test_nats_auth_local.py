"""`coordination.nats.auth` on the local target: the embedded NATS server asks for the token,
which reaches the processes through their environment only, never argv or the plan."""

from __future__ import annotations

import os

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.errors import UserInputError
from dis_serve.launch.secrets import GraphSecrets, graph_secrets, nats_token
from dis_serve.render.launch_plan import NATS_TOKEN_ENV, RenderContext, render_launch_plan
from dis_serve.topology import NatsAuth, ProcessKind, Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
TOKEN = "s3cret-token-for-tests"


def _with_auth(tls: str = "off", **auth) -> Topology:
    data = {**DEMO, "coordination": {"nats": {"auth": auth}}, "security": {"tls": {"mode": tls}}}
    return Topology.model_validate(data)


def _token_file(tmp_path, mode=0o600, text=TOKEN + "\n"):
    path = tmp_path / "nats-token"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_local_nats_server_reads_its_token_config_from_the_run_directory():
    plan = render_launch_plan(_with_auth(token_env="DS_TOKEN", tls="auto"),
                              RenderContext(run_dir="/r"))
    argv = plan.process("nats").argv
    assert argv[1:3] == ["-c", "/r/nats.conf"]


def test_without_auth_or_tls_the_local_nats_server_takes_no_config():
    topo = Topology.model_validate({**DEMO, "security": {"tls": {"mode": "off"}}})
    plan = render_launch_plan(topo, RenderContext(run_dir="/r"))
    assert "-c" not in plan.process("nats").argv


def test_the_token_is_read_from_its_file_and_goes_to_the_environment_only(tmp_path):
    topo = _with_auth(token_file=str(_token_file(tmp_path)))
    assert graph_secrets(topo, tmp_path).env_for(ProcessKind.WORKER)[NATS_TOKEN_ENV] == TOKEN
    plan = render_launch_plan(topo, RenderContext(run_dir=tmp_path))
    assert TOKEN not in plan.model_dump_json()


def test_the_token_is_read_from_the_named_environment_variable(monkeypatch):
    monkeypatch.setenv("DS_TOKEN", TOKEN)
    assert nats_token(NatsAuth(token_env="DS_TOKEN")) == TOKEN


def test_a_missing_token_variable_is_one_error_with_the_fix(monkeypatch):
    monkeypatch.delenv("DS_TOKEN", raising=False)
    with pytest.raises(UserInputError, match="export DS_TOKEN="):
        nats_token(NatsAuth(token_env="DS_TOKEN"))


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = _token_file(tmp_path, mode=0o644)
    with pytest.raises(UserInputError, match="chmod 600"):
        nats_token(NatsAuth(token_file=str(path)))


def test_an_empty_token_file_is_refused(tmp_path):
    path = _token_file(tmp_path, text="\n")
    with pytest.raises(UserInputError, match="empty"):
        nats_token(NatsAuth(token_file=str(path)))


def test_a_token_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    with pytest.raises(UserInputError, match="named pipe"):
        nats_token(NatsAuth(token_file=str(path)))


def test_nats_server_gets_the_token_as_a_quoted_config_string_so_a_leading_dash_is_no_number():
    # nats-server parses a config variable's value: bare "-E..." (token_urlsafe) is a
    # malformed number and the server would not start.
    secrets = GraphSecrets(nats_token='-Eab"c')
    assert secrets.env_for(ProcessKind.NATS) == {NATS_TOKEN_ENV: '"-Eab\\"c"'}
    assert secrets.env_for(ProcessKind.FRONTEND)[NATS_TOKEN_ENV] == '-Eab"c'
