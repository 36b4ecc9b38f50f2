"""Fixtures: a real ``weft serve`` on 127.0.0.1:0 in a temporary data directory (the binary
is ``$WEFT_BIN``, else ``weft`` on the PATH), and per test a fresh Group with a coordinator
and a worker, each a :class:`weft.Client` with its own key and session."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import weft


def weft_binary() -> str:
    binary = os.environ.get("WEFT_BIN") or shutil.which("weft")
    if not binary:
        pytest.fail("set WEFT_BIN to the weft binary (the Rust test runner does)")
    return binary


@dataclass
class Server:
    url: str
    data_dir: Path
    process: subprocess.Popen[str]

    def admin(self) -> weft.Admin:
        return weft.Admin.from_data_dir(self.url, self.data_dir)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    root = Path(tempfile.mkdtemp(prefix="weft-py-"))
    process = subprocess.Popen(
        [weft_binary(), "serve", "--data-dir", str(root / "data"), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline().strip()
    assert first.startswith("listening on "), first
    try:
        yield Server(first.removeprefix("listening on "), root / "data", process)
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def contract(execution_seconds: int = 300, criteria: tuple[str, ...] = ("ac-1",)) -> dict[str, Any]:
    """A complete v1 work contract (every CON-1 item)."""
    deadline = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=30)
    return {
        "objective": "summarise the corpus",
        "deliverables": [{"name": "report", "mediaType": "application/json", "schema": None}],
        "acceptanceCriteria": [
            {"id": c, "description": "the tests pass", "requiredEvidence": ["automated_test"]}
            for c in criteria
        ],
        "inputs": [],
        "dependsOn": [],
        "dependencyPolicy": "all_verified",
        "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
        "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
        "deadline": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "urgency": "normal",
        "businessImpact": "medium",
        "budgets": {
            "financial": 10.0,
            "tokens": 200000,
            "toolCalls": 500,
            "computeSeconds": 3600,
            "wallClockSeconds": 7200,
            "sideEffects": 5,
        },
        "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": None, "maxCost": 2.0},
        "risk": "low",
        "approvalRequired": False,
        "leases": {
            "offerSeconds": 600,
            "ownershipSeconds": 3600,
            "executionSeconds": execution_seconds,
            "blockedSeconds": 3600,
            "graceSeconds": 120,
        },
        "childFailurePolicy": "block",
    }


BUDGET = {
    "financial": 100.0,
    "tokens": 1000000,
    "toolCalls": 5000,
    "computeSeconds": 36000,
    "wallClockSeconds": 72000,
    "sideEffects": 50,
}


@dataclass
class World:
    server: Server
    group: str
    mission: str
    coordinator: weft.Client
    worker: weft.Client
    worker_key: weft.AgentKey

    def enrol(self, role: str, name: str | None = None) -> weft.Client:
        """Another Agent in this Group with ``role``, its session open."""
        agent = name or f"{role}-{uuid.uuid4().hex[:8]}"
        key = weft.AgentKey.generate()
        admin = self.server.admin()
        admin.register_agent(agent, key)
        admin.set_membership(self.group, agent, [role])
        client = weft.Client(self.server.url, agent_id=agent, group_id=self.group, key=key)
        client.open_session()
        return client

    def work_item(self, execution_seconds: int = 300, criteria: tuple[str, ...] = ("ac-1",)) -> str:
        """A WorkItem authorized, offered to the worker, accepted and started by it."""
        work_item = f"wi-{uuid.uuid4().hex[:12]}"
        self.coordinator.authorize(work_item, self.mission, contract(execution_seconds, criteria))
        self.coordinator.offer(work_item, [str(self.worker.agent_id)])
        self.worker.accept_offer(work_item)
        self.worker.start(work_item)
        return work_item


@pytest.fixture
def world(server: Server) -> Iterator[World]:
    group = f"g-{uuid.uuid4().hex[:12]}"
    admin = server.admin()
    admin.create_group(group)
    clients = []
    keys = []
    for role in ("coordinator", "worker"):
        agent = f"{role}-{uuid.uuid4().hex[:8]}"
        key = weft.AgentKey.generate()
        admin.register_agent(agent, key)
        admin.set_membership(group, agent, [role])
        client = weft.Client(server.url, agent_id=agent, group_id=group, key=key)
        client.open_session()
        clients.append(client)
        keys.append(key)
    mission = f"m-{uuid.uuid4().hex[:12]}"
    clients[0].create_mission(mission, "python client tests", BUDGET)
    world = World(server, group, mission, clients[0], clients[1], keys[1])
    try:
        yield world
    finally:
        for client in clients:
            client.close()
        admin.close()
