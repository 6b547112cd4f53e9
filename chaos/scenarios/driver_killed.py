"""(5) The media driver SIGKILLed (or stopped with SIGTERM) mid-stream, then a new one started over its stale dir.

Every client reports DriverTimeoutError within the driver timeout (plus one conductor duty cycle and the
heartbeat granularity); once they all have, the old heartbeat is older than the driver timeout and a new
driver takes the dir over (it deletes the stale one). The clients (``--reconnect``) connect again and
traffic resumes: everything acknowledged on the new driver reaches the reconnected subscriber. What was
received before the kill is only checked for order, duplicates and integrity. Counters are per driver:
the deltas are taken on the new driver only (all 0).
"""

from chaos import faults
from chaos.scenario import Scenario
from harness.awaiting import await_condition
from harness.driver_settings import DRIVER_TIMEOUT_MS

DRIVER_TIMEOUT_S = DRIVER_TIMEOUT_MS / 1000  # the drivers' AERON_DRIVER_TIMEOUT and the workers' --driver-timeout-ms
DETECTION_SLACK_S = 1.5  # heartbeat granularity, client conductor idle and duty cycle, Python scheduling


class DriverKilled(Scenario):
    name = "driver-killed"
    summary = "SIGKILL the driver; clients see DriverTimeoutError, a new driver starts, clients reconnect"
    graceful = False  # True: stop it with SIGTERM (it closes and exits 0) instead

    def run(self, ctx):
        sub = ctx.start_subscriber("subA", reconnect=True)
        sub.await_ready()
        publisher = ctx.start_publisher("pub0", 0, 0, interval_us=ctx.rng.choice([100, 200, 300]), reconnect=True)
        kill_at = ctx.rng.randint(200, 1000 if ctx.quick else 5000)
        ctx.timeline.event("schedule", kill_driver_after_acked=kill_at)
        faults.await_acked(ctx, publisher, kill_at)
        ctx.killed_ts_ns = killed_ts = faults.stop_driver(ctx) if self.graceful else faults.kill_driver(ctx)
        clients = [sub, publisher]

        def all_timed_out():
            return all(any(e["event"] == "client_error" for e in w.events()) for w in clients)

        await_condition(all_timed_out, DRIVER_TIMEOUT_S + 15, "every client to report the dead driver",
                        processes=[w.process for w in clients])
        ctx.start_driver("driver2")
        ctx.counters_baseline = ctx.counter_snapshot("before")  # the new driver's own counters start here
        restarted_ts = ctx.timeline.event("observed", what="new driver started")["ts_ns"]

        def received_again():
            return any(e["event"] == "recv" and e.get("incarnation", 0) >= 1 for e in sub.events())

        await_condition(received_again, 60, "the reconnected subscriber to receive",
                        processes=[w.process for w in clients])
        recovered = ctx.timeline.event("observed", what="reconnected subscriber received")["ts_ns"]
        ctx.record_recovery(killed_ts, recovered, "driver kill to first message through the new driver")
        ctx.metrics["restart_to_traffic_s"] = (recovered - restarted_ts) / 1e9
        more = ctx.rng.randint(300, 800 if ctx.quick else 5000)
        faults.await_acked(ctx, publisher, publisher.count("sent") + more)
        ctx.stop_worker(publisher)

    def check(self, ctx, before, after):
        failures = []
        detection = {}
        for name in ("subA", "pub0"):
            errors = [e for e in ctx.workers[name].events() if e["event"] == "client_error"]
            if [e["error"] for e in errors] != ["DriverTimeoutError"]:
                failures.append(f"{name} client errors {[e['error'] for e in errors]}, expected [DriverTimeoutError]")
                continue
            detection[name] = (errors[0]["ts_ns"] - ctx.killed_ts_ns) / 1e9
            if detection[name] > DRIVER_TIMEOUT_S + DETECTION_SLACK_S:
                failures.append(f"{name} reported DriverTimeoutError {detection[name]:.2f}s after the kill, "
                                f"> driver timeout {DRIVER_TIMEOUT_S}s + {DETECTION_SLACK_S}s")
        ctx.metrics["driver_timeout_detection_s"] = detection
        sent_after = [e for e in ctx.workers["pub0"].events() if e["event"] == "sent" and e.get("incarnation", 0) >= 1]
        ctx.metrics["acked_on_new_driver"] = len(sent_after)
        if not sent_after:
            failures.append("nothing was acknowledged on the new driver")
        return failures


class DriverStopped(DriverKilled):
    """The same with a graceful stop: a closed driver sends its clients nothing, they notice by its heartbeat."""

    name = "driver-stopped"
    summary = "stop the driver (SIGTERM); clients see DriverTimeoutError, a new driver starts, clients reconnect"
    graceful = True
