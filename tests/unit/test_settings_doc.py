"""docs/settings.md is what the contexts define (name, default, meaning), and AERON_* variables nothing reads are
named, not silently ignored."""

from dataclasses import fields
from pathlib import Path

import pytest

from aeron_numba import settings_doc
from aeron_numba.archive.context import ArchiveContext
from aeron_numba.driver.context import DriverContext

DOC = Path(__file__).resolve().parents[2] / settings_doc.DOC_PATH


def test_checked_in_reference_is_what_the_generator_writes():
    assert DOC.read_text(encoding="utf-8") == settings_doc.render(), (
        "docs/settings.md is stale: python -m aeron_numba.settings_doc --write docs/settings.md")


@pytest.mark.parametrize("cls", [DriverContext, ArchiveContext])
def test_every_setting_has_a_variable_a_meaning_and_a_row(cls):
    text = settings_doc.render()
    for f in fields(cls):
        env, doc = f.metadata.get("env"), f.metadata.get("doc")
        assert env and doc and doc.endswith("."), f.name
        assert f"| `{env}` | `{settings_doc.default_text(f)}` | {doc} |" in text


def test_defaults_are_written_as_a_user_would_set_them():
    rows = {env: default for env, default, _, _ in settings_doc.context_settings(DriverContext)}
    assert rows["AERON_CLIENT_LIVENESS_TIMEOUT"] == "10s"
    assert rows["AERON_PUBLICATION_HEARTBEAT_TIMEOUT"] == "100ms"
    assert rows["AERON_NAK_UNICAST_DELAY"] == "100us"
    assert rows["AERON_IPC_TERM_BUFFER_LENGTH"] == "64m"
    assert rows["AERON_DIR_DELETE_ON_START"] == "false"
    assert rows["AERON_DIR"] == "(unset)"
    assert rows["AERON_THREADING_MODE"] == "SHARED"


def test_a_default_in_the_reference_means_the_same_once_parsed():
    # The text shown as a default, set as the variable, gives the context's default back.
    for cls in (DriverContext, ArchiveContext):
        for f in fields(cls):
            text = settings_doc.default_text(f)
            if text in ("(unset)", "(empty)"):
                continue
            assert f.metadata["parse"](text, f.metadata["env"]) == f.default, f.name


def test_variables_nothing_reads_are_named():
    environ = {"AERON_DIR": "/x", "AERON_ARCHIVE_DIR": "a", "AERON_CLIENT_NAME": "c", "AERON_LOG_LEVEL": "INFO",
               "AERON_SOCKET_MULTICAST_TTL": "4", "AERON_PRINT_CONFIGURATION": "true", "HOME": "/root"}
    assert settings_doc.ignored_variables(environ) == ["AERON_PRINT_CONFIGURATION", "AERON_SOCKET_MULTICAST_TTL"]
