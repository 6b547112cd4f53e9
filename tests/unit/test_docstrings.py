"""Every public class, function and method of the package's API says what it is for (a docstring), so ``help()`` and
an editor show it: the names ``aeron_numba`` exports and the archive client's."""

import inspect

import aeron_numba
from aeron_numba.archive import client as archive_client


def public_api() -> dict[str, object]:
    names = {name: getattr(aeron_numba, name) for name in aeron_numba.__all__}
    names.update({name: getattr(archive_client, name) for name in archive_client.__all__})
    return {name: value for name, value in names.items() if inspect.isclass(value) or inspect.isfunction(value)}


def _has_docstring(obj, name: str) -> bool:
    doc = obj.__doc__
    # A dataclass without a docstring gets its signature as one: that says nothing a user needs.
    return bool(doc and doc.strip()) and not doc.startswith(f"{name}(")


def undocumented() -> list[str]:
    missing = []
    for name, obj in public_api().items():
        if not _has_docstring(obj, name):
            missing.append(name)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        for member, value in vars(obj).items():
            if member.startswith("_"):
                continue
            function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if inspect.isfunction(function) and not _has_docstring(function, member):
                missing.append(f"{name}.{member}")
    return missing


def test_the_public_api_is_what_this_test_checks():
    api = public_api()
    assert {"Aeron", "Publication", "Subscription", "Image", "MediaDriver", "AeronArchive",
            "AeronArchiveContext"} <= set(api)
    assert sum(1 + sum(1 for m in vars(c) if not m.startswith("_")) for c in api.values() if inspect.isclass(c)) > 150


def test_every_public_class_and_method_has_a_docstring():
    assert undocumented() == []
