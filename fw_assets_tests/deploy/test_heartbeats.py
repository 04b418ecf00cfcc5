"""What the daemon concludes about a started run's worker from its Celery task, its heartbeat, its
process and Redis: a heartbeat means alive whatever the task's state; a missing one means a lost
host only once it is certain: the run's process gone where the daemon can see it, else the
heartbeat missing for two beats with Redis up long enough for a live worker to have written it."""

from fw_assets.deploy.heartbeats import WorkerState, run_worker_verdict

LOST_AFTER = 30.0
CONFIRM_AFTER = 10.0
BEAT = {"host": "worker-2", "pid": "4242"}


def verdict(task_state="STARTED", heartbeat=None, redis_uptime=3600.0, process_alive=None, missing_for=60.0):
    return run_worker_verdict(
        task_state, heartbeat, process_alive=process_alive, missing_for=missing_for, redis_uptime=redis_uptime,
        lost_after=LOST_AFTER, confirm_after=CONFIRM_AFTER, last_host="worker-2",
    )


def test_a_run_with_a_heartbeat_is_running_even_if_redis_lost_its_task():
    assert verdict(heartbeat=BEAT).state == WorkerState.RUNNING
    assert verdict("PENDING", heartbeat=BEAT).state == WorkerState.RUNNING  # Redis restarted empty
    assert verdict(heartbeat=BEAT, process_alive=False).state == WorkerState.RUNNING  # its worker reports it


def test_a_run_without_a_heartbeat_lost_its_host_and_the_message_says_which_and_why():
    lost = verdict()
    assert lost.state == WorkerState.LOST
    assert "worker-2" in lost.message and "no heartbeat for 30s" in lost.message
    assert "retries" in lost.message


def test_a_deleted_heartbeat_of_a_process_alive_on_this_machine_is_no_lost_host():
    alive = verdict(process_alive=True)
    assert alive.state == WorkerState.RUNNING
    assert "runs on this machine" in alive.message and "Not lost" in alive.message


def test_no_heartbeat_and_the_runs_process_gone_on_this_machine_is_a_lost_host_at_once():
    gone = verdict(process_alive=False, missing_for=0.0, redis_uptime=1.0)
    assert gone.state == WorkerState.LOST
    assert "Lost the run's host worker-2" in gone.message and "is gone" in gone.message


def test_a_heartbeat_missing_elsewhere_for_less_than_two_beats_is_not_yet_a_lost_host():
    waiting = verdict(missing_for=CONFIRM_AFTER - 1)
    assert waiting.state == WorkerState.RUNNING
    assert "writes it again within 10s" in waiting.message
    assert verdict(missing_for=0.0).state == WorkerState.RUNNING  # seen missing for the first time
    assert verdict(missing_for=CONFIRM_AFTER).state == WorkerState.LOST


def test_no_heartbeat_just_after_redis_restarted_is_not_yet_a_lost_host():
    waiting = verdict(redis_uptime=LOST_AFTER - 1)
    assert waiting.state == WorkerState.RUNNING
    assert "Redis started 29s ago" in waiting.message
    assert verdict(redis_uptime=LOST_AFTER).state == WorkerState.LOST


def test_a_finished_task_says_how_it_ended_whatever_the_heartbeat():
    assert verdict("SUCCESS").state == WorkerState.SUCCEEDED
    assert verdict("FAILURE", heartbeat=BEAT).state == WorkerState.FAILED
