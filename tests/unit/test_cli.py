"""What every command line shares: the logging level from -v or AERON_LOG_LEVEL, and the program name shown."""

import logging

import pytest

from aeron_numba import cli


@pytest.mark.parametrize("verbosity,environ,level", [
    (0, {}, logging.WARNING),
    (0, {"AERON_LOG_LEVEL": ""}, logging.WARNING),
    (0, {"AERON_LOG_LEVEL": "info"}, logging.INFO),
    (0, {"AERON_LOG_LEVEL": " DEBUG "}, logging.DEBUG),
    (1, {"AERON_LOG_LEVEL": "ERROR"}, logging.INFO),  # -v wins over the environment
    (2, {}, logging.DEBUG),
    (3, {}, logging.DEBUG),
])
def test_log_level_from_verbose_then_environment_then_warning(verbosity, environ, level):
    assert cli.log_level(verbosity, environ) == level


def test_a_log_level_that_is_not_one_is_named_with_the_choices():
    with pytest.raises(ValueError) as info:
        cli.log_level(0, {"AERON_LOG_LEVEL": "chatty"})
    assert str(info.value) == "AERON_LOG_LEVEL='chatty' must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"


@pytest.mark.parametrize("argv0,prog", [
    ("/venv/bin/aeron-stat", "aeron-stat"),
    ("/work/aeron_numba/driver/__main__.py", "python -m aeron_numba.driver"),
    ("-c", "python -m aeron_numba.driver"),
    ("", "python -m aeron_numba.driver"),
])
def test_program_name_is_the_command_typed(monkeypatch, argv0, prog):
    monkeypatch.setattr(cli.sys, "argv", [argv0])
    assert cli.prog_name("aeron_numba.driver") == prog
    assert cli.prog_name("aeron_numba.driver", "aeron-numba driver") == "aeron-numba driver"


def test_variables_nothing_reads_are_warned_about(monkeypatch, caplog):
    monkeypatch.setenv("AERON_PRINT_CONFIGURATION", "true")
    monkeypatch.setenv("AERON_TERM_BUFFER_LENGTH", "64k")  # read by the driver: no warning
    caplog.set_level(logging.WARNING, logger="aeron_numba.test")
    cli.warn_ignored_variables(logging.getLogger("aeron_numba.test"))
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if "AERON_TERM_BUFFER_LENGTH" in m] == []
    assert "AERON_PRINT_CONFIGURATION='true' is not a setting aeron-numba reads: it has no effect (see " \
           "docs/settings.md, or print them with: python -m aeron_numba settings)" in messages
