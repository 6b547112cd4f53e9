"""The public names of the package resolve (and only those; Trio's test_exports idea)."""

import aeron_numba


def test_every_public_name_resolves():
    for name in aeron_numba.__all__:
        assert getattr(aeron_numba, name) is not None, name
    assert aeron_numba.Aeron.__name__ == "Aeron" and aeron_numba.MediaDriver.__name__ == "MediaDriver"
    assert aeron_numba.MediaDriverProcess.__name__ == "MediaDriverProcess"
    assert aeron_numba.BACK_PRESSURED == -2


def test_unknown_name_is_an_attribute_error():
    try:
        aeron_numba.NoSuchThing
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
