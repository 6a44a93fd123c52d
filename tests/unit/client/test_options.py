"""The options both clients share: the terms options' types and what they make of them."""

from __future__ import annotations

import argparse

import pytest

from fleetcache.client import options


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    options.add_terms_options(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(("text", "expected"), [
    ("16384", 16384), ("512K", 512 * 1024), ("8M", 8 * 1024**2), ("8m", 8 * 1024**2),
    ("8MiB", 8 * 1024**2), ("8M/s", 8 * 1024**2), ("1G", 1024**3), (" 2 k ", 2048),
])
def test_a_rate_takes_binary_suffixes(text: str, expected: int) -> None:
    assert options.rate(text) == expected


@pytest.mark.parametrize("text", ["", "8X", "1.5M", "-1", "0", "M", "8 M B", "9" * 40])
def test_a_malformed_rate_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        options.rate(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("22:00-05:00", ("22:00", "05:00")), ("01:00:30 - 05:00", ("01:00:30", "05:00")),
])
def test_a_window_is_two_clock_times(text: str, expected: tuple[str, str]) -> None:
    assert options.window(text) == expected


@pytest.mark.parametrize("text", ["22-05", "24:00-05:00", "22:00", "22:00-05:60", "a-b"])
def test_a_malformed_window_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="HH:MM-HH:MM"):
        options.window(text)


def test_an_instant_needs_its_offset() -> None:
    assert options.instant("2026-11-29T01:00:00Z") == "2026-11-29T01:00:00Z"
    assert options.instant("2026-11-29T01:00:00+01:00") == "2026-11-29T01:00:00+01:00"
    with pytest.raises(argparse.ArgumentTypeError, match="add Z"):
        options.instant("2026-11-29T01:00:00")
    with pytest.raises(argparse.ArgumentTypeError, match="ISO 8601"):
        options.instant("tomorrow")


@pytest.mark.parametrize(("argv", "message"), [
    (["--parallelism", "0"], "not 1 or more"), (["--origin-downloads", "x"], "whole number"),
    (["--priority", "101"], "from 0 to 100"), (["--priority", "-1"], "from 0 to 100"),
])
def test_counts_and_priority_are_checked_for_their_form(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(*argv)
    assert message in capsys.readouterr().err


def test_terms_from_args_in_the_apis_order_and_empty_without_options() -> None:
    assert options.terms_from_args(_parse()) == {}
    terms = options.terms_from_args(_parse(
        "--priority", "0", "--job-rate", "1M", "--window", "22:00-05:00",
        "--timezone", "Europe/Paris", "--not-before", "2026-11-29T01:00:00Z"))
    assert list(terms) == ["not_before", "window", "job_bytes_per_second", "priority"]
    assert terms["window"] == {"start": "22:00", "end": "05:00", "timezone": "Europe/Paris"}
    assert terms["priority"] == 0
    assert options.terms_from_args(_parse("--window", "01:00-02:00"))["window"][
        "timezone"] == options.DEFAULT_TIMEZONE
    with pytest.raises(options.TermsUsageError, match="--window"):
        options.terms_from_args(_parse("--timezone", "UTC"))


def test_the_clients_terms_come_in_the_apis_order():
    """The client keeps its own list (it imports nothing of the services): the same as the
    one definition of the terms."""
    import argparse

    from fleetcache.client import options
    from fleetcache.common import job_terms

    parser = argparse.ArgumentParser()
    options.add_terms_options(parser)
    args = parser.parse_args([
        "--priority", "60", "--job-rate", "8M", "--host-rate", "1M", "--origin-downloads", "1",
        "--parallelism", "2", "--deadline", "2030-01-01T00:00:00Z", "--window", "01:00-05:00",
        "--not-before", "2029-01-01T00:00:00Z"])
    assert tuple(options.terms_from_args(args)) == job_terms.KEYS


def test_a_rate_in_bits_is_refused():
    import argparse

    import pytest

    from fleetcache.client import options

    for bits in ("8Mb", "1Gb/s", "8mib"):
        with pytest.raises(argparse.ArgumentTypeError):
            options.rate(bits)
    assert options.rate("8MiB/s") == options.rate("8M") == 8 * 2**20
