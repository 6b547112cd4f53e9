"""The driver cannot create files (as on a full disk) while traffic runs.

A file size limit (RLIMIT_FSIZE, smaller than a log buffer) is put on the live driver process: a new
publication's log cannot be created (EFBIG), so ``add_publication`` fails with GENERIC_ERROR, the code Aeron's
C driver gives every errno but ENOSPC (a full disk proper gets STORAGE_SPACE: tests/unit/driver), and a
message naming the file and its length; the half-made file is removed, and the error is logged and counted
once per refusal. The running publication keeps flowing (its log is already mapped). Once the limit is lifted the
refused publisher's retry succeeds and its messages arrive too.
"""

from chaos import faults
from chaos.invariants import AtLeast
from chaos.scenario import ERRORS, Scenario
from harness.awaiting import await_condition

LIMIT_BYTES = 1024 * 1024  # below a 1 MiB-term log (3 MiB + metadata), far above the driver's own output


class DiskFull(Scenario):
    name = "disk-full"
    summary = "the driver cannot create files: add_publication is refused, traffic goes on, then recovers"
    counter_deltas = {ERRORS: AtLeast(1)}  # exact count checked below against the refusals the client saw
    allowed_errors = [r"cannot create \S+\.logbuffer of length=\d+: File too large"]

    def run(self, ctx):
        count = 2000 if ctx.quick else 20000  # the refused publisher's messages x 2
        ctx.start_subscriber("subA").await_ready()
        running = ctx.start_publisher("pub0", 0, 0, interval_us=ctx.rng.choice([200, 300]))
        fault_at = ctx.rng.randint(100, 500 if ctx.quick else 5000)
        refusals = ctx.rng.randint(1, 3 if ctx.quick else 10)
        ctx.timeline.event("schedule", limit_after_acked=fault_at, refusals=refusals)
        faults.await_acked(ctx, running, fault_at)
        ctx.fault_ts_ns = faults.limit_file_size(ctx, ctx.driver, LIMIT_BYTES)
        # An exclusive publication always needs a new log file (a shared one would reuse pub0's).
        refused = ctx.start_publisher("pub1", 1, count // 2, interval_us=0, retry_add=True, exclusive=True)
        await_condition(lambda: refused.count("add_failed") >= refusals, 30,
                        f"{refused.name} to be refused {refusals} times", processes=[refused.process])
        ctx.lifted_ts_ns = lifted = faults.lift_file_size_limit(ctx, ctx.driver)
        faults.await_acked(ctx, refused, 1)
        acked = ctx.timeline.event("observed", what=f"{refused.name} acknowledged its first message")["ts_ns"]
        ctx.record_recovery(lifted, acked, "limit lifted to the refused publisher's first message")
        faults.await_acked(ctx, running, running.count("sent") + ctx.rng.randint(100, 500))
        ctx.stop_worker(running)

    def check(self, ctx, before, after):
        failures = []
        refusals = [e for e in ctx.workers["pub1"].events() if e["event"] == "add_failed"]
        codes = {e["error_code"] for e in refusals}
        if codes != {"GENERIC_ERROR"}:  # EFBIG, as C's driver codes it
            failures.append(f"add_publication refused with {codes}, expected only GENERIC_ERROR")
        errors = after.get(ERRORS, 0) - before.get(ERRORS, 0)
        if errors != len(refusals):
            failures.append(f"Errors rose by {errors}, expected {len(refusals)} (one per refused add_publication)")
        during = [e for e in ctx.workers["pub0"].events()
                  if e["event"] == "sent" and ctx.fault_ts_ns < e["ts_ns"] < ctx.lifted_ts_ns]
        ctx.metrics.update(refusals=len(refusals), acked_by_pub0_during_fault=len(during))
        if not during:
            failures.append("pub0 acknowledged nothing while the limit was on: running traffic must go on")
        return failures
