"""A cluster node's command line: ``python -m aeron_numba cluster``, ``python -m aeron_numba.cluster``,
``aeron-numba-cluster`` (Aeron's ClusteredMediaDriver plus its ClusteredServiceContainer, in one command).

Two process layouts (docs/cluster.md), chosen with ``--layout``:

* ``one-process`` (the default): this process runs the media driver, the archive and the consensus module as one
  duty cycle (``ClusteredMediaDriver``, ``cluster/clustered_media_driver.py``). A compiled service (one with a
  ``session_message_handler``, such as ``CompiledKeyValueService``) runs on that thread too; a Python one in a
  clustered service container child (``python -m aeron_numba.cluster.service --service pkg.module:Class``), so
  that its callbacks never stall consensus (``--service-container member|child`` decides otherwise);
* ``processes``: this process runs the consensus module (``ConsensusModule(ctx).run()``) and starts three
  children: the media driver (``MediaDriverProcess``, as ``archive --embedded-driver`` starts one), the archive
  (``python -m aeron_numba.archive``) and the service container. It stays for comparison (the cluster benchmark
  measures both) until the one-process layout has everything it has.

Every child is signalled by the kernel if this process dies (``child_processes.py``). Start-up order is Aeron's
ClusteredMediaDriver's: driver, archive (in ``processes``, awaited: its counters appear in the driver's
``cnc.dat``), consensus module, then the service container, which waits for the consensus module by itself.

Settings are Aeron's variables (``AERON_*`` of the driver, ``AERON_ARCHIVE_*``, ``AERON_CLUSTER_*``); the flags set
the common ones. Every setting of the four contexts is checked before anything starts: a bad one is one line and
exit 2, and leaves no process or file behind. Where Aeron requires a setting that follows from the member's own
endpoints, the node derives it unless it is set (Aeron's ClusteredMediaDriver leaves these to the user):

* the archive's control channel: ``aeron:udp?endpoint=<this member's archive endpoint>``;
* the archive's replication channel and its control response channel, and the consensus module's replication
  channel: ``aeron:udp?endpoint=<this member's host>:0``.

SIGINT/SIGTERM stop the consensus module, then the service container, the archive and the driver, in that order.
If a child (or, in one process, the driver's or the archive's agent) stops on its own the node stops the others and
exits 1 naming it: a node without its driver, archive or service cannot take part in the cluster, and a fail-stop
member is what the other members can deal with.

``python -m aeron_numba.cluster demo`` runs ``commands/cluster_demo.py``: three nodes, a client, a leader kill.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time

from aeron_numba import cli
from aeron_numba.child_processes import exit_on_signals, with_parent_death_signal
from aeron_numba.cli import fail, user_error_line

MODULE = "aeron_numba.cluster"
SERVICE_MODULE = "aeron_numba.cluster.service"
ARCHIVE_MODULE = "aeron_numba.archive"
DEFAULT_SERVICE = "aeron_numba.cluster.examples.key_value_service:KeyValueService"
SERVICE_CLASS_NAME_ENV = "AERON_CLUSTER_SERVICE_CLASS_NAME"
LAYOUT_ONE_PROCESS = "one-process"
LAYOUT_PROCESSES = "processes"
LAYOUTS = (LAYOUT_ONE_PROCESS, LAYOUT_PROCESSES)
#: Where the one-process layout runs the service container (``--service-container``).
SERVICE_IN_MEMBER, SERVICE_IN_CHILD, SERVICE_AUTO = "member", "child", "auto"
SERVICE_PLACEMENTS = (SERVICE_AUTO, SERVICE_IN_MEMBER, SERVICE_IN_CHILD)
EXIT_USAGE = 2
EXIT_CHILD_DIED = 1
#: How long a child may take to be ready (a cold Numba cache compiles the archive's kernels first).
CHILD_START_TIMEOUT_S = 120.0
#: How long a child may take to stop after SIGTERM before it is killed.
CHILD_STOP_TIMEOUT_S = 10.0
#: How long the service container has to stop by itself once the consensus module has terminated the node.
SERVICE_TERMINATION_TIMEOUT_S = 5.0
log = logging.getLogger("aeron_numba.cluster")

#: flag -> (variable it sets, help)
FLAGS = {
    "--member-id": ("AERON_CLUSTER_MEMBER_ID", "this member's id, one of the ids in the cluster members"),
    "--cluster-members": ("AERON_CLUSTER_MEMBERS", "id,ingress,consensus,log,catchup,archive endpoints of each "
                                                   "member, members separated by |"),
    "--cluster-dir": ("AERON_CLUSTER_DIR", "the node's cluster dir (recording.log, node-state.dat, mark files)"),
    "--archive-dir": ("AERON_ARCHIVE_DIR", "the node's archive dir"),
    "--dir": ("AERON_DIR", "the aeron dir of the node's media driver"),
    "--service": (SERVICE_CLASS_NAME_ENV, f"package.module:Class of the clustered service (default {DEFAULT_SERVICE})"),
}


class NodeSettingsError(ValueError):
    """A setting of the node is wrong: one line for the user."""


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from aeron_numba.archive.context import ArchiveContext
    from aeron_numba.cluster.context import ClusteredServiceContext, ConsensusModuleContext
    from aeron_numba.driver.context import DriverContext
    from aeron_numba.settings_doc import context_settings

    prog = cli.prog_name(MODULE, prog)
    sections = []
    for title, cls in (("consensus module", ConsensusModuleContext), ("service container", ClusteredServiceContext),
                       ("archive", ArchiveContext), ("media driver", DriverContext)):
        rows = context_settings(cls)
        width = max(len(env) for env, _, _, _ in rows)
        sections.append(f"{title} settings (environment variables, with their defaults):\n"
                        + "\n".join(f"  {env:<{width}}  {default}" for env, default, _, _ in rows))
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run an aeron-numba cluster node until SIGINT/SIGTERM: media driver, archive and consensus module\n"
                    "in this process, the clustered service container on their thread (a compiled service) or in a\n"
                    "child (--layout processes: the consensus module here, the other three as child processes).\n"
                    "Settings come from AERON_*, AERON_ARCHIVE_* and AERON_CLUSTER_* environment variables; the\n"
                    "flags set the common ones.\n\n"
                    f"'{prog} demo' starts a 3-node cluster with the example service on 127.0.0.1-3, sends it\n"
                    "messages from a client, kills the leader while it runs, and tells what happened.",
        epilog="\n\n".join(sections) + "\n\nWhat each one means: docs/settings.md, or: python -m aeron_numba settings")
    for flag, (env, about) in FLAGS.items():
        parser.add_argument(flag, help=f"{about} (default: ${env})")
    parser.add_argument("--layout", choices=LAYOUTS, default=LAYOUT_ONE_PROCESS,
                        help="one-process (default): driver, archive and consensus module in this process, the "
                             "service container in a child; processes: each of the four in a process of its own")
    parser.add_argument("--service-container", choices=SERVICE_PLACEMENTS, default=SERVICE_AUTO,
                        help="one-process layout only: member runs the service container on the member's thread, "
                             "child in a process of its own; auto (default): member for a compiled service (one "
                             "with a session_message_handler, such as CompiledKeyValueService), child for a Python "
                             "one, whose callbacks would stall consensus")
    cli.add_logging_arguments(parser)
    cli.add_version_argument(parser)
    return parser


# ------------------------------------------------------------------------------------------------ settings
class NodeSettings:
    """The node's four concluded contexts and the environment its children get."""

    def __init__(self, environ: dict[str, str], driver, archive, consensus_module, service, service_spec: str):
        self.environ = environ
        self.driver = driver
        self.archive = archive
        self.consensus_module = consensus_module
        self.service = service
        self.service_spec = service_spec


def _derive_member_defaults(environ: dict[str, str]) -> None:
    """Fill in the channels that follow from this member's endpoints, where the user left them unset."""
    from aeron_numba.cluster.cluster_member import find_member, parse_cluster_members
    from aeron_numba.cluster.cluster_error import ClusterError

    try:
        members = parse_cluster_members(environ.get("AERON_CLUSTER_MEMBERS", ""))
        member = find_member(members, int(environ.get("AERON_CLUSTER_MEMBER_ID", "0")))
    except (ClusterError, ValueError):
        return  # the consensus module's context names what is wrong
    if member is None:
        return
    host = member.archive_endpoint.rpartition(":")[0]
    for name, value in (("AERON_ARCHIVE_CONTROL_CHANNEL", f"aeron:udp?endpoint={member.archive_endpoint}"),
                        ("AERON_ARCHIVE_REPLICATION_CHANNEL", f"aeron:udp?endpoint={host}:0"),
                        ("AERON_ARCHIVE_CONTROL_RESPONSE_CHANNEL", f"aeron:udp?endpoint={host}:0"),
                        ("AERON_CLUSTER_REPLICATION_CHANNEL", f"aeron:udp?endpoint={host}:0")):
        if not environ.get(name):
            environ[name] = value


def node_settings(args: argparse.Namespace, environ: dict[str, str]) -> NodeSettings:
    """Every setting of the node, from ``environ`` and the flags, checked; ``NodeSettingsError`` (one line) if one
    is wrong. Imports the service's module (to check it names a class) but starts nothing."""
    from aeron_numba.archive.context import ArchiveContext
    from aeron_numba.cluster.context import ClusteredServiceContext, ConsensusModuleContext
    from aeron_numba.driver.context import DriverContext
    from aeron_numba.errors import AeronError

    environ = dict(environ)
    for flag, (env, _) in FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            if value == "":
                raise NodeSettingsError(f"{flag} must not be empty")
            environ[env] = value
    service_spec = environ.get(SERVICE_CLASS_NAME_ENV) or DEFAULT_SERVICE
    environ[SERVICE_CLASS_NAME_ENV] = service_spec
    _derive_member_defaults(environ)
    try:
        driver = DriverContext.from_env(environ)
        if "AERON_DIR_DELETE_ON_SHUTDOWN" not in environ:
            driver.dir_delete_on_shutdown = True  # the node's own driver: its dir lives and dies with the node
        driver.conclude()
        # Every part of the node works on the one driver: its (concluded, absolute) dir for all of them.
        environ["AERON_DIR"] = str(driver.aeron_dir)
        archive = ArchiveContext.from_env(environ).conclude()
        consensus_module = ConsensusModuleContext.from_env(environ).conclude()
        service = ClusteredServiceContext.from_env(environ).conclude()
    except (AeronError, ValueError) as exc:
        raise NodeSettingsError(str(exc)) from None
    if service.service_factory is None or not isinstance(service.service_factory, type):
        raise NodeSettingsError(f"{SERVICE_CLASS_NAME_ENV}={service_spec!r} must name a ClusteredService class")
    if consensus_module.service_count != 1:
        raise NodeSettingsError(f"service_count={consensus_module.service_count}: this node starts one service "
                                f"container (service id 0); AERON_CLUSTER_SERVICE_COUNT must be 1")
    if service.service_id != 0:
        raise NodeSettingsError(f"service_id={service.service_id}: this node's one service has id 0 "
                                f"(AERON_CLUSTER_SERVICE_ID must be 0 or unset)")
    if archive.archive_dir == consensus_module.cluster_dir:
        raise NodeSettingsError(f"the archive dir and the cluster dir are both {archive.archive_dir}: give each its "
                                f"own (--archive-dir, --cluster-dir)")
    # The children see the derived, absolute dirs, whatever their working directory.
    environ["AERON_ARCHIVE_DIR"] = archive.archive_dir
    environ["AERON_CLUSTER_DIR"] = consensus_module.cluster_dir
    return NodeSettings(environ, driver, archive, consensus_module, service, service_spec)


# ------------------------------------------------------------------------------------------------ children
class ChildProcess:
    """A child of the node (archive or service container): started in its own session, SIGTERMed by the kernel if
    the node dies, stopped with SIGTERM (then SIGKILL) by ``close``."""

    def __init__(self, name: str, argv: list[str], environ: dict[str, str]):
        self.name = name
        self.stopping = False
        self.process = subprocess.Popen(with_parent_death_signal(argv, signal.SIGTERM), env=environ,
                                        stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def request_stop(self) -> None:
        """SIGTERM, once: the child is stopping (its exit is not a death the node reports)."""
        if not self.stopping and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.stopping = True

    def close(self, timeout_s: float = CHILD_STOP_TIMEOUT_S) -> int:
        self.request_stop()
        if self.wait(timeout_s) is None:
            log.warning("%s (pid %d) did not stop within %gs of SIGTERM: killed", self.name, self.pid, timeout_s)
            self.process.kill()
            self.process.wait()
        return self.process.returncode


def _start_service_container(settings: NodeSettings) -> ChildProcess:
    """``python -m aeron_numba.cluster.service --service <the node's service>`` on the node's environment."""
    return ChildProcess("service container", [sys.executable, "-m", SERVICE_MODULE, "--service", settings.service_spec],
                        settings.environ)


def _await_archive(settings: NodeSettings, archive: ChildProcess, timeout_s: float) -> None:
    """Wait until the archive's counters are in the node's cnc.dat: it has connected and set up its conductor."""
    from aeron_numba.errors import AeronError
    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.kernels.counters import CountersReader
    from aeron_numba.layout import archive as A

    deadline = time.monotonic() + timeout_s
    with CncFile.open(settings.driver.cnc_path) as cnc_file:
        reader = CountersReader(cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer)
        try:
            while not any(info.type_id == A.ARCHIVE_CONTROL_SESSIONS_TYPE_ID for info in reader.for_each()):
                if archive.exit_code() is not None:
                    raise AeronError(f"the archive exited with code {archive.exit_code()} while starting")
                if time.monotonic() > deadline:
                    raise AeronError(f"the archive was not ready within {timeout_s:g}s in "
                                     f"{settings.archive.archive_dir}")
                time.sleep(0.01)
        finally:
            reader = None  # its views of the mapping go before the mapping does


class _ChildWatch:
    """While the consensus module runs: a child that exits on its own stops the node (``stop()``, the consensus
    module's ``request_close``, safe in a signal handler), and is remembered for the exit status."""

    def __init__(self, children: list, stop):
        self.children = children
        self.stop = stop
        self.died: dict[str, str] = {}  # name -> what happened
        self._previous = None

    def _on_sigchld(self, signum, frame) -> None:
        for name, child in self.children:
            code = None if child.stopping or name in self.died else child.exit_code()
            # A service container that the consensus module terminated (a cluster shutdown or abort) exits 0.
            if code is not None and not (code == 0 and name == "service container"):
                self.died[name] = f"the {name} (pid {child.pid}) exited with code {code}"
                self.stop()

    def __enter__(self) -> "_ChildWatch":
        self._previous = signal.signal(signal.SIGCHLD, self._on_sigchld)
        self._on_sigchld(signal.SIGCHLD, None)  # one that died before the handler was in place
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGCHLD, self._previous or signal.SIG_DFL)


class _DriverChild:
    """``MediaDriverProcess`` seen as a ``ChildProcess`` by the watch."""

    def __init__(self, driver):
        self.driver = driver
        self.stopping = False

    @property
    def pid(self) -> int:
        return self.driver.process.pid

    def exit_code(self) -> int | None:
        return self.driver.process.poll()

    def close(self) -> int | None:
        self.stopping = True
        return self.driver.close()


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        from aeron_numba.commands.cluster_demo import main as demo_main

        return demo_main(argv[1:], prog=f"{cli.prog_name(MODULE, prog)} demo")
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    level = cli.configure_logging(parser, args.verbose)
    cli.warn_ignored_variables(log)
    try:
        settings = node_settings(args, dict(os.environ))
    except NodeSettingsError as exc:
        return fail(parser.prog, str(exc), EXIT_USAGE)
    if args.verbose:  # the children log at the node's level
        settings.environ[cli.LOG_LEVEL_ENV] = logging.getLevelName(level)
    os.environ.update(settings.environ)  # MediaDriverProcess passes this process's environment on
    if args.layout == LAYOUT_PROCESSES:
        if args.service_container != SERVICE_AUTO:
            return fail(parser.prog, f"--service-container {args.service_container}: only the one-process layout "
                                     f"places the service container (--layout processes always runs it in a child)",
                        EXIT_USAGE)
        return run_node(parser.prog, settings)
    from aeron_numba.driver.context import THREADING_MODE_SHARED

    mode = settings.driver.threading_mode
    if mode != THREADING_MODE_SHARED:
        return fail(parser.prog, f"threading_mode={mode} (AERON_THREADING_MODE): in the one-process layout the driver "
                                 f"is one agent of the member's duty cycle and must be SHARED; or use --layout "
                                 f"processes", EXIT_USAGE)
    return run_member(parser.prog, settings, args.service_container)


def _start_line(settings: NodeSettings, layout: str, driver_pid: int, archive_pid: int, service_pid: int) -> str:
    ctx = settings.consensus_module
    return (f"aeron-numba cluster node: member {ctx.cluster_member_id} of cluster {ctx.cluster_id} in "
            f"{ctx.cluster_dir}, archive {settings.archive.archive_dir}, aeron dir {settings.driver.aeron_dir}, "
            f"service {settings.service_spec}, layout {layout}; pid {os.getpid()}, media driver pid {driver_pid}, "
            f"archive pid {archive_pid}, service container pid {service_pid}")


def is_compiled_service(service) -> bool:
    """A service whose session messages are applied in compiled code (``session_message_handler``, the container's
    compiled path) and that has no background work of its own to run every cycle: it can share the consensus
    module's thread without a Python callback per message stalling it."""
    from aeron_numba.cluster.service.clustered_service import ClusteredServiceBase

    return (getattr(service, "session_message_handler", None) is not None
            and getattr(type(service), "do_background_work", None) in (None, ClusteredServiceBase.do_background_work))


def run_member(prog: str, settings: NodeSettings, service_container: str = SERVICE_AUTO) -> int:
    """The one-process layout: driver, archive and consensus module here (``ClusteredMediaDriver``), the service
    container on their thread or in a child (``service_container``); run until the member stops, then stop the
    service."""
    from aeron_numba.errors import AeronError

    member = child = None
    with exit_on_signals():
        try:
            try:
                from aeron_numba.cluster.clustered_media_driver import ClusteredMediaDriver

                service = settings.service.service_factory()
                in_member = service_container == SERVICE_IN_MEMBER or (
                    service_container == SERVICE_AUTO and is_compiled_service(service))
                if in_member:
                    member = ClusteredMediaDriver(settings.driver, settings.archive, settings.consensus_module,
                                                  settings.service, service)
                else:
                    member = ClusteredMediaDriver(settings.driver, settings.archive, settings.consensus_module)
                    child = _start_service_container(settings)
            except (AeronError, ValueError) as exc:
                return fail(prog, str(exc))
            except OSError as exc:  # the user's dirs: a file in the way, read-only, no room
                return fail(prog, user_error_line(exc, "cluster path"))
            service_pid = os.getpid() if child is None else child.pid
            print(_start_line(settings, LAYOUT_ONE_PROCESS, os.getpid(), os.getpid(), service_pid), flush=True)
            watch = _ChildWatch([] if child is None else [("service container", child)], member.request_close)
            with watch:
                member.run()  # SIGINT/SIGTERM: a clean stop (its runner's handlers, within this block)
            died = list(watch.died.values())
            if not member.stop_requested:
                died += [f"the {part}'s agent stopped" for part in member.stopped
                         if part not in ("consensus module", "service container")]
            # Then the service container, its driver still running: it stops by itself once its consensus module
            # has gone (a cluster termination, or this node's stop), else on SIGTERM (or, here, its agent closed).
            member.close_consensus_module()
            if child is None:
                member.serve_until(member.service_stopped, SERVICE_TERMINATION_TIMEOUT_S)
            elif not member.serve_until(lambda: child.exit_code() is not None, SERVICE_TERMINATION_TIMEOUT_S):
                log.info("service container still running after the consensus module stopped: stopping it")
                child.request_stop()
                member.serve_until(lambda: child.exit_code() is not None, CHILD_STOP_TIMEOUT_S)
            if died:
                return fail(prog, "stopped: " + "; ".join(died), EXIT_CHILD_DIED)
            return 0
        finally:
            for part in (child, member):
                if part is not None:
                    try:
                        part.close()
                    except Exception as exc:  # keep stopping the others
                        log.error("stopping %r: %s", part, exc)


def run_node(prog: str, settings: NodeSettings) -> int:
    """Start the node's processes, run the consensus module until it stops, then stop the rest."""
    from aeron_numba.errors import AeronError

    driver = archive = service = consensus_module = None
    watch = None
    # SIGINT/SIGTERM while starting up unwind through the clean-up below, which a second one cannot cut short.
    with exit_on_signals():
        try:
            try:
                from aeron_numba.cluster.consensus_module import ConsensusModule
                from aeron_numba.driver import MediaDriverProcess

                driver = _DriverChild(MediaDriverProcess.launch(settings.driver, timeout_s=CHILD_START_TIMEOUT_S))
                archive = ChildProcess("archive", [sys.executable, "-m", ARCHIVE_MODULE], settings.environ)
                _await_archive(settings, archive, CHILD_START_TIMEOUT_S)
                consensus_module = ConsensusModule(settings.consensus_module)
                service = _start_service_container(settings)
            except (AeronError, ValueError) as exc:
                return fail(prog, str(exc))
            except OSError as exc:  # the user's dirs: a file in the way, read-only, no room
                return fail(prog, user_error_line(exc, "cluster path"))
            print(_start_line(settings, LAYOUT_PROCESSES, driver.pid, archive.pid, service.pid), flush=True)
            watch = _ChildWatch([("media driver", driver), ("archive", archive), ("service container", service)],
                                consensus_module.request_close)
            with watch:
                run_consensus_module(consensus_module)  # its runner turns SIGINT/SIGTERM into a clean stop
            consensus_module = None
            if service.wait(SERVICE_TERMINATION_TIMEOUT_S) is None:
                log.info("service container still running after the consensus module stopped: stopping it")
            if watch.died:
                return fail(prog, "stopped: " + "; ".join(watch.died.values()), EXIT_CHILD_DIED)
            return 0
        finally:
            for part in (service, consensus_module, archive, driver):
                if part is not None:
                    try:
                        part.close()
                    except Exception as exc:  # keep stopping the others
                        log.error("stopping %r: %s", part, exc)


def run_consensus_module(consensus_module) -> None:
    """Run the consensus module's duty cycle in this thread until it terminates or is signalled; it is closed when
    this returns (as ``Archive.run`` closes the archive)."""
    consensus_module.run()
