"""(7) A rogue process writes garbage into the to-driver buffer while normal clients publish and subscribe.

The garbage writer maps cnc.dat and writes seeded random records (random type ids and bodies) plus raw
random bytes with impossible record lengths. The driver must survive it (exit 0 at SIGTERM), answer and
record every bad command in its error log (one entry per kind, allow-listed below), count them in Errors,
and the normal clients must be unaffected: no client error, every acknowledged message received.
"""

from chaos.invariants import AtLeast
from chaos.scenario import CLIENT_TIMEOUTS, ERRORS, Scenario

# Random bodies under a valid command type id may decode: a keepalive or close from a made-up client id
# registers a client that then times out. The real clients are checked by their exit codes and events.
MIN_UNKNOWN_TYPE_ERRORS = 1


class GarbageWriter(Scenario):
    name = "garbage-writer"
    summary = "a rogue process writes random records into the to-driver buffer; driver and traffic unaffected"
    counter_deltas = {ERRORS: AtLeast(1), CLIENT_TIMEOUTS: AtLeast(0)}
    allowed_errors = [
        r"^[\w.]*AeronError: to-driver buffer: (corrupt record header|record blocked)",
        r"^[\w.]*ControlProtocolError: command typeId=-?\d+ (unknown|not supported by this driver)",
        r"^[\w.]*ControlProtocolError: \w+Message: \w+ length=-?\d+ runs past the message end",
        r"^[\w.]*ControlProtocolError: \w+Message: \w+( length field)? at \d+ needs \d+ bytes, message is \d+",
        r"^[\w.]*ControlProtocolError: unknown (publication|subscription|counter) client_id=-?\d+ registration_id=",
        r"^[\w.]*ControlProtocolError: terminate driver refused",
    ]

    def run(self, ctx):
        sub = ctx.start_subscriber("subA")
        sub.await_ready()
        publisher = ctx.start_publisher("pub0", 0, 0, interval_us=ctx.rng.choice([100, 200]))
        publisher.await_ready()
        duration = ctx.rng.uniform(2.0, 3.0) if ctx.quick else ctx.rng.uniform(10.0, 30.0)
        ctx.timeline.event("schedule", garbage_duration_s=duration)
        rogue = ctx.start_garbage("rogue", duration, interval_us=ctx.rng.choice([200, 500]),
                                  raw_every=ctx.rng.choice([20, 50]))
        rogue.process.wait(duration + 60)
        ctx.timeline.event("process_exit", name=rogue.name, pid=rogue.process.pid, exit_code=rogue.process.exit_code)
        ctx.stop_worker(publisher)

    def check(self, ctx, before, after):
        failures = []
        stats = [e for e in ctx.workers["rogue"].events() if e["event"] == "garbage"]
        if not stats:
            return ["the garbage writer logged no statistics"]
        ctx.metrics["garbage"] = {k: stats[0][k] for k in ("records", "unknown_type", "raw", "full")}
        ctx.metrics["errors_delta"] = after.get(ERRORS, 0) - before.get(ERRORS, 0)
        if stats[0]["records"] < 100 or stats[0]["raw"] < 2:
            failures.append(f"too little garbage written: {ctx.metrics['garbage']}")
        # Each record with an unknown type id is answered with an error and counted; raw records are skipped
        # and counted too, but one skip may pad over several of them (up to the next plausible header).
        if ctx.metrics["errors_delta"] < stats[0]["unknown_type"] + 1:
            failures.append(f"Errors rose by {ctx.metrics['errors_delta']}, expected >= {stats[0]['unknown_type']} "
                            f"(records with an unknown type id) + 1 (skipped raw bytes)")
        for name in ("subA", "pub0"):
            errors = [e["error"] for e in ctx.workers[name].events() if e["event"] == "client_error"]
            if errors:
                failures.append(f"{name} (a normal client) ended with {errors}")
        return failures
