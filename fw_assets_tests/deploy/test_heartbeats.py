"""What the daemon concludes about a started run's worker from its Celery task, its heartbeat and
Redis: a heartbeat means alive whatever the task's state; a missing one means a lost host only once
Redis has been up long enough for a live worker to have written it again."""

from fw_assets.deploy.heartbeats import WorkerState, run_worker_verdict

LOST_AFTER = 30.0
BEAT = {"host": "worker-2", "pid": "4242"}


def verdict(task_state="STARTED", heartbeat=None, redis_uptime=3600.0):
    return run_worker_verdict(task_state, heartbeat, redis_uptime, LOST_AFTER, last_host="worker-2")


def test_a_run_with_a_heartbeat_is_running_even_if_redis_lost_its_task():
    assert verdict(heartbeat=BEAT).state == WorkerState.RUNNING
    assert verdict("PENDING", heartbeat=BEAT).state == WorkerState.RUNNING  # Redis restarted empty


def test_a_run_without_a_heartbeat_lost_its_host_and_the_message_says_which_and_why():
    lost = verdict()
    assert lost.state == WorkerState.LOST
    assert "worker-2" in lost.message and "no heartbeat for 30s" in lost.message
    assert "retries" in lost.message


def test_no_heartbeat_just_after_redis_restarted_is_not_yet_a_lost_host():
    waiting = verdict(redis_uptime=LOST_AFTER - 1)
    assert waiting.state == WorkerState.RUNNING
    assert "Redis started 29s ago" in waiting.message
    assert verdict(redis_uptime=LOST_AFTER).state == WorkerState.LOST


def test_a_finished_task_says_how_it_ended_whatever_the_heartbeat():
    assert verdict("SUCCESS").state == WorkerState.SUCCEEDED
    assert verdict("FAILURE", heartbeat=BEAT).state == WorkerState.FAILED
