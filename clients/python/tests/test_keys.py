"""Keys in the format of ``weft keygen``, DSSE as DESIGN §4 spells it, and sessions."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path

import pytest

import weft
from conftest import Server, World, weft_binary
from weft import dsse


def test_a_key_from_weft_keygen_loads_and_a_saved_key_is_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = subprocess.run(
        [weft_binary(), "keygen", "--json"],
        env={**os.environ, "WEFT_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    import json

    printed = json.loads(out.stdout)
    key = weft.AgentKey.load(home / "agent.key")
    assert key.keyid == printed["keyid"] and key.public_key_b64 == printed["publicKey"]
    again = weft.AgentKey.generate()
    path = again.save(tmp_path / "mine" / "agent.key")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert weft.AgentKey.load(path).keyid == again.keyid
    with pytest.raises(weft.InvalidRequest):
        again.save(path)


def test_dsse_signs_the_pae_and_verifies_only_the_signer() -> None:
    key = weft.AgentKey.generate()
    assert dsse.pae("t", b"hi") == b"DSSEv1 1 t 2 hi"
    envelope = dsse.sign(key, dsse.EVIDENCE, b'{"a":1}')
    assert base64.b64decode(envelope["payload"]) == b'{"a":1}'
    assert dsse.verify(envelope, key.public_bytes, dsse.EVIDENCE) == b'{"a":1}'
    with pytest.raises(weft.IntegrityError):
        dsse.verify(envelope, weft.AgentKey.generate().public_bytes)
    envelope["payload"] = base64.b64encode(b'{"a":2}').decode()
    with pytest.raises(weft.IntegrityError):
        dsse.verify(envelope, key.public_bytes)


def test_a_new_session_replaces_the_old_one(world: World) -> None:
    old = world.worker.session
    assert world.worker.whoami()["sessionEpoch"] == old.session_epoch
    stale = weft.Client(world.server.url, token=old.token)
    new = world.worker.open_session()
    assert new.session_epoch == old.session_epoch + 1
    with pytest.raises(weft.Unauthenticated):
        stale.whoami()


def test_a_non_member_gets_no_session(server: Server) -> None:
    admin = server.admin()
    key = weft.AgentKey.generate()
    admin.register_agent("loner", key)
    admin.create_group("lonely")
    client = weft.Client(server.url, agent_id="loner", group_id="lonely", key=key)
    with pytest.raises(weft.Forbidden) as refused:
        client.open_session()
    assert refused.value.code == "not_a_member"


def test_a_renewed_session_keeps_its_token_epochs_and_leases(world: World) -> None:
    work_item = world.work_item()
    before = world.worker.session
    renewed = world.worker.renew_session()
    assert renewed.token == before.token and renewed.session_epoch == before.session_epoch
    assert renewed.expires_at >= before.expires_at
    lease = world.worker.renew(work_item)  # the lease opened before the renewal goes on
    assert lease.session_epoch == before.session_epoch
    assert world.worker.whoami()["expiresAt"] == renewed.expires_at


def test_secrets_stay_out_of_reprs_links_and_other_users_reach(tmp_path: Path) -> None:
    session = weft.Session("secret-token", "a", "g", 1, 1, "2030-01-01T00:00:00Z")
    assert "secret-token" not in repr(session)
    key = weft.AgentKey.generate()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not a key")
    home = tmp_path / "new-home"
    (home).mkdir(mode=0o700)
    (home / "agent.key").symlink_to(elsewhere)
    with pytest.raises(weft.InvalidRequest):
        key.save(home / "agent.key")
    key.save(home / "agent.key", force=True)
    assert elsewhere.read_text() == "not a key", "the link's target is never written"
    assert not (home / "agent.key").is_symlink()
    fresh = key.save(tmp_path / "fresh" / "dir" / "agent.key")
    assert stat.S_IMODE(fresh.parent.stat().st_mode) == 0o700
    with pytest.raises(weft.InvalidRequest):
        dsse.payload_bytes({"metric": float("nan")})
