"""A clustered service container's command line: ``python -m aeron_numba.cluster.service --service
package.module:ClassName``, ``aeron-numba-cluster-service``.

The service class (any ``package.module:attribute`` that makes a ClusteredService when called) is imported before
anything starts: one that cannot be imported, or a bad setting, is one line on stderr and exit 2. Settings come
from the ``AERON_CLUSTER_*`` variables (``--help`` lists them); ``--service`` overrides
AERON_CLUSTER_SERVICE_CLASS_NAME, ``--cluster-dir`` AERON_CLUSTER_DIR, ``--dir`` AERON_DIR, ``--service-id``
AERON_CLUSTER_SERVICE_ID.
"""

from __future__ import annotations

import argparse
import logging
import os

from aeron_numba import cli
from aeron_numba.child_processes import exit_on_signals
from aeron_numba.cli import fail, user_error_line

MODULE = "aeron_numba.cluster.service"
log = logging.getLogger("aeron_numba.cluster.service")


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from aeron_numba.cluster.context import ClusteredServiceContext
    from aeron_numba.settings_doc import help_epilog

    prog = cli.prog_name(MODULE, prog)
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a clustered service container (the service side of an Aeron Cluster node) in this\n"
                    "process until SIGINT/SIGTERM or the consensus module terminates it. Settings come from\n"
                    "AERON_CLUSTER_* environment variables.",
        epilog=help_epilog(ClusteredServiceContext, prog))
    parser.add_argument("--service", metavar="package.module:ClassName",
                        help="the ClusteredService to run (default: AERON_CLUSTER_SERVICE_CLASS_NAME)")
    parser.add_argument("--cluster-dir", help="cluster dir (default: AERON_CLUSTER_DIR, else aeron-cluster)")
    parser.add_argument("--dir", help="aeron dir of the node's media driver (default: AERON_DIR)")
    parser.add_argument("--service-id", type=int, help="service id (default: AERON_CLUSTER_SERVICE_ID, else 0)")
    cli.add_logging_arguments(parser)
    cli.add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    cli.configure_logging(parser, args.verbose)
    cli.warn_ignored_variables(log)
    from aeron_numba.cluster.context import ClusteredServiceContext
    from aeron_numba.errors import AeronError

    overrides = {k: v for k, v in (("service_class_name", args.service), ("cluster_dir", args.cluster_dir),
                                   ("aeron_dir", args.dir), ("service_id", args.service_id)) if v is not None}
    with exit_on_signals():
        try:
            ctx = ClusteredServiceContext.from_env(**overrides).conclude()
        except (AeronError, ValueError) as exc:
            return fail(parser.prog, str(exc), 2)
        if ctx.service_factory is None:
            return fail(parser.prog, "no service: give --service package.module:ClassName (or set "
                                     "AERON_CLUSTER_SERVICE_CLASS_NAME)", 2)
        try:
            service = ctx.service_factory()
        except Exception as exc:  # noqa: BLE001 - the user's class failed to construct: one line, exit 2
            return fail(parser.prog, f"service_class_name={ctx.service_class_name!r} could not be made: "
                                     f"{type(exc).__name__}: {exc}", 2)
        from aeron_numba.cluster.service.container import ClusteredServiceContainer

        try:
            container = ClusteredServiceContainer(ctx, service)
        except TypeError as exc:  # not a ClusteredService
            return fail(parser.prog, str(exc), 2)
        except (AeronError, ValueError) as exc:
            return fail(parser.prog, str(exc))
        except OSError as exc:
            return fail(parser.prog, user_error_line(exc, "mark file"))
        print(f"aeron-numba clustered service {ctx.service_name!r} (service {ctx.service_id}, cluster "
              f"{ctx.cluster_id}) in {ctx.cluster_dir}, pid {os.getpid()}", flush=True)
        container.run()
        if not container.agent.is_started and not container.agent.is_termination_requested:
            return fail(parser.prog, f"the service did not start (see the error log of {container.mark_file.path})")
        return 0
