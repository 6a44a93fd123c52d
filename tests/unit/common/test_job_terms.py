"""A job's terms (fleetcache.common.job_terms): the checks a request's terms get, and the
periods in which a job may download."""

from __future__ import annotations

import datetime

import pytest

from fleetcache.common import exception, job_terms

UTC = datetime.UTC
NOW = datetime.datetime(2026, 11, 28, 23, 0, tzinfo=UTC)
CAPS = job_terms.Caps(parallelism=8, origin_downloads=2, host_bytes_per_second=2**24)
PARIS = {"start": "01:00", "end": "05:00", "timezone": "Europe/Paris"}


def at(day: int, hour: int, minute: int = 0) -> datetime.datetime:
    return datetime.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def test_a_daily_window_in_a_named_zone_opens_at_its_local_time():
    period = job_terms.next_period({"window": PARIS}, NOW)
    assert period == job_terms.Period(at(29, 0), at(29, 4))  # Paris is UTC+1 in November
    assert not job_terms.is_open({"window": PARIS}, NOW)
    assert job_terms.is_open({"window": PARIS}, at(29, 3, 59))


def test_a_window_across_midnight_is_open_on_both_sides():
    late = {"window": {"start": "22:00", "end": "02:00", "timezone": "UTC"}}
    assert job_terms.next_period(late, NOW) == job_terms.Period(NOW, at(29, 2))
    assert job_terms.next_period(late, at(29, 1)) == job_terms.Period(at(29, 1), at(29, 2))
    assert job_terms.next_period(late, at(29, 2)) == job_terms.Period(at(29, 22), at(30, 2))


def test_not_before_and_deadline_bound_the_period():
    assert job_terms.next_period({"not_before": "2026-11-29T03:00:00+01:00"}, NOW) == (
        job_terms.Period(at(29, 2), None))
    cut = {"window": PARIS, "deadline": "2026-11-29T00:10:00Z"}
    assert job_terms.next_period(cut, NOW) == job_terms.Period(at(29, 0), at(29, 0, 10))
    assert job_terms.next_period({"window": PARIS, "deadline": "2026-11-28T23:30:00Z"},
                                 NOW) is None
    assert job_terms.past_deadline({"deadline": "2026-11-28T23:00:00Z"}, NOW)
    assert not job_terms.past_deadline({}, NOW)


def test_terms_within_the_caps_come_back_normalized():
    checked = job_terms.check_terms(
        {"parallelism": 8, "origin_downloads": 1, "deadline": "2027-01-01T01:00:00+01:00",
         "window": {"start": "01:00", "end": "05:00:30", "timezone": "Europe/Paris"},
         "job_bytes_per_second": 2**30, "priority": 100}, CAPS, NOW)
    assert checked["deadline"] == "2027-01-01T00:00:00Z"
    assert checked["window"]["end"] == "05:00:30" and checked["priority"] == 100


@pytest.mark.parametrize("terms, message", [
    ({"parallelism": 9}, "fleetcache:parallelism: 9 is above the operator's limit 8 "
                         "([image_cache] precache_concurrency)"),
    ({"origin_downloads": 3}, "fleetcache:origin_downloads: 3 is above"),
    ({"host_bytes_per_second": 2**25}, "max_download_bytes_per_second"),
    ({"host_bytes_per_second": 10}, "fleetcache:host_bytes_per_second: 10 is out of range"),
    ({"priority": 101}, "fleetcache:priority: 101 is out of range: from 0 to 100"),
    ({"parallelism": True}, "fleetcache:parallelism: is not an integer"),
    ({"parallelism": "3"}, "fleetcache:parallelism: is not an integer"),
    ({"window": {"start": "1:00", "end": "05:00", "timezone": "UTC"}}, "not HH:MM"),
    ({"window": {"start": "01:00\n", "end": "05:00", "timezone": "UTC"}}, "not HH:MM"),
    ({"window": {"start": "01:00", "end": "01:00", "timezone": "UTC"}}, "empty window"),
    ({"window": {"start": "01:00", "end": "05:00", "timezone": "Mars/Olympus"}},
     "not a known IANA time zone"),
    ({"window": {"start": "01:00", "end": "05:00", "timezone": "../../etc/passwd"}},
     "not a known IANA time zone"),
    ({"window": {"start": "01:00", "end": "05:00", "timezone": "x" * 10000}},
     "not an IANA name"),
    ({"window": "01:00-05:00"}, "fleetcache:window"),
    ({"deadline": "2020-01-01T00:00:00Z"}, "fleetcache:deadline: 2020-01-01T00:00:00Z is "
                                           "already past"),
    ({"not_before": "2026-12-01T00:00:00"}, "fleetcache:not_before: not an ISO 8601 time "
                                            "with an offset"),
    ({"not_before": "2026-12-02T00:00:00Z", "deadline": "2026-12-01T00:00:00Z"},
     "is not after not_before"),
    ({"window": PARIS, "deadline": "2026-11-28T23:30:00Z"},
     "comes before the window next opens"),
    ({"colour": "blue"}, "fleetcache:colour: is not a term"),
])
def test_bad_terms_name_the_field_and_the_limit(terms, message):
    with pytest.raises(exception.InvalidInput) as caught:
        job_terms.check_terms(terms, CAPS, NOW)
    assert message in str(caught.value)


def test_caps_of_zero_do_not_limit():
    checked = job_terms.check_terms({"origin_downloads": 50}, job_terms.Caps(0, 0, 0), NOW)
    assert checked == {"origin_downloads": 50}
