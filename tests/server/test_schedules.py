"""An agent runs on a schedule: `/agents/{id}/schedules` (a cron expression and the inputs), each firing a session
of its own, run by the workers once per time however many server processes look."""
from __future__ import annotations

import time
import uuid

import pytest

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import CHAT_DSL, Api, Server, make_token, wait_for

EVERY_SECOND = "* * * * * *"            # a sixth field is seconds; the workers look every 5 s


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("schedules")
    with Server(str(tmp / "s.db"), tmp) as server:
        client = Api(server, make_token(server.db, "sched"))
        yield client
        client.close()


def schedule_sessions(api: Api, agent_id: str) -> list[dict]:
    return [s for s in api.ok("GET", f"/agents/{agent_id}/sessions", params={"page_size": 100})
            if s.get("name", "").startswith("Schedule")]


def test_a_schedule_runs_the_agent_in_a_session_of_its_own_until_it_is_disabled(api):
    agent_id = api.agent(CHAT_DSL)
    made = api.ok("POST", f"/agents/{agent_id}/schedules", {"cron": EVERY_SECOND, "query": "daily report"})
    assert made["enabled"] is True and made["next_run_time"] > time.time() * 1000 - 1000
    fired = wait_for(lambda: api.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["last_session_id"],
                     timeout=30, what="the schedule's first run")
    log = wait_for(lambda: [m for m in api.ok("GET", f"/agents/{agent_id}/sessions/{fired}")["messages"]
                            if m["role"] == "assistant" and m.get("id")], timeout=30, what="its answer")
    questions = [m["content"] for m in api.ok("GET", f"/agents/{agent_id}/sessions/{fired}")["messages"]
                 if m["role"] == "user"]
    assert questions == ["daily report"] and log[-1]["content"].startswith("Turn1:")
    api.ok("PUT", f"/agents/{agent_id}/schedules/{made['id']}", {"enabled": False})
    runs = api.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["runs"]
    time.sleep(6)                                       # more than a tick of the workers
    assert api.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["runs"] == runs
    assert [s["id"] for s in api.ok("GET", f"/agents/{agent_id}/schedules")] == [made["id"]]
    api.ok("DELETE", f"/agents/{agent_id}/schedules/{made['id']}")
    assert api.ok("GET", f"/agents/{agent_id}/schedules") == []


@pytest.mark.parametrize("body, field", [
    ({"cron": "every day"}, "cron"),
    ({"cron": "61 * * * *"}, "cron"),
    ({}, "cron"),
    ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "timezone"),
    ({"cron": "0 9 * * *", "inputs": ["not", "an", "object"]}, "inputs"),
    ({"cron": "0 9 * * *", "query": 7}, "query"),
    ({"cron": "0 9 * * *", "enabled": "yes"}, "enabled"),
    ({"cron": "0 9 * * *", "end_time": "tomorrow"}, "end_time"),
    ({"cron": "0 9 * * *", "when": "now"}, "unknown fields: when"),
])
def test_a_schedule_that_cannot_be_kept_is_refused_naming_its_field(api, body, field):
    agent_id = api.agent(CHAT_DSL)
    reply = api.call("POST", f"/agents/{agent_id}/schedules", body)
    assert reply["code"] != 0 and field in reply["message"], reply


def test_a_schedule_in_a_time_zone_and_another_tenants_view(api):
    agent_id = api.agent(CHAT_DSL)
    made = api.ok("POST", f"/agents/{agent_id}/schedules", {"cron": "0 9 * * 1-5", "timezone": "Asia/Shanghai"})
    next_run = time.gmtime(made["next_run_time"] / 1000)
    assert (next_run.tm_hour, next_run.tm_min) == (1, 0)        # 9:00 in Shanghai is 1:00 UTC
    other = Api(api.server, make_token(api.server.db, f"other-{uuid.uuid4().hex[:6]}"))
    assert other.call("GET", f"/agents/{agent_id}/schedules")["code"] != 0
    assert other.call("DELETE", f"/agents/{agent_id}/schedules/{made['id']}")["code"] != 0
    other.close()
    api.ok("DELETE", f"/agents/{agent_id}")                      # its schedules go with it
    assert api.call("GET", f"/agents/{agent_id}/schedules")["code"] != 0


def test_each_firing_happens_once_however_many_servers_run(tmp_path):
    url = postgres_url()
    with Server(url, tmp_path) as a, Server(url, tmp_path) as b:
        api = Api(a, make_token(url, f"sched-{uuid.uuid4().hex[:8]}"))
        agent_id = api.agent(CHAT_DSL)
        made = api.ok("POST", f"/agents/{agent_id}/schedules", {"cron": EVERY_SECOND, "query": "tick"})
        wait_for(lambda: api.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["runs"] >= 3, timeout=60,
                 what="three firings")
        api.ok("PUT", f"/agents/{agent_id}/schedules/{made['id']}", {"enabled": False})
        runs = api.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["runs"]
        sessions = wait_for(lambda: (found := schedule_sessions(api, agent_id)) and len(found) == runs and found,
                            timeout=30, what="a session per firing")
        assert len({s["id"] for s in sessions}) == runs          # none fired twice
        api.close()
