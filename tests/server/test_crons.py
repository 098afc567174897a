"""The cron scheduler's claim: each firing of a due cron is taken by one replica only."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from reflexrag.server.routes.crons import next_run_date
from reflexrag.server.store import ServiceStore, timestamp


async def test_two_replicas_polling_at_once_fire_a_due_cron_once(tmp_path):
    replicas = [await ServiceStore.open(tmp_path / "service.sqlite") for _ in range(2)]
    now = datetime.now(UTC)
    for cron_id, end in (("due", None), ("ended", now - timedelta(seconds=1))):
        await replicas[0].create_cron(
            {
                "cron_id": cron_id,
                "owner": "",
                "assistant_id": "naive",
                "thread_id": None,
                "schedule": "* * * * *",
                "timezone": None,
                "end_time": timestamp(end) if end else None,
                "on_run_completed": "delete",
                "enabled": True,
                "next_run_date": timestamp(now - timedelta(minutes=1)),
                "payload": {"assistant_id": "naive", "input": {"question": "q"}},
                "metadata": {},
            }
        )
    try:
        seen = await asyncio.gather(*(replica.due_crons(now, 10) for replica in replicas))
        assert [[cron["cron_id"] for cron in due] for due in seen] == [["due"], ["due"]]
        following = next_run_date("* * * * *", now, None)
        claims = await asyncio.gather(
            *(
                replica.claim_cron(due[0], following)
                for replica, due in zip(replicas, seen, strict=True)
            )
        )
        assert sorted(claims) == [False, True]
        assert await replicas[1].due_crons(now, 10) == []
        assert (await replicas[1].get_cron("due", ""))["next_run_date"] == following
    finally:
        for replica in replicas:
            await replica.close()


def test_the_next_date_is_read_in_the_cron_s_time_zone():
    winter = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    tokyo = next_run_date("0 6 * * *", winter, "Asia/Tokyo")
    assert tokyo == timestamp(datetime(2026, 12, 2, 21, 0, tzinfo=UTC))  # 06:00 on the 3rd
    assert next_run_date("0 6 * * *", winter, None) == timestamp(
        datetime(2026, 12, 3, 6, 0)
    )  # zoneless: UTC
    assert next_run_date("0 0 1 1 * * 2020", winter, None) is None  # a year that has passed
