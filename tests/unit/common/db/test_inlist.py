"""``IN`` lists padded to a few lengths."""

from __future__ import annotations

from fleetcache.common.db.inlist import padded


def test_lengths_are_powers_of_two_filled_with_the_last_value() -> None:
    assert padded([]) == []
    assert padded(["a"]) == ["a"]
    assert padded(["a", "b", "c"]) == ["a", "b", "c", "c"]
    assert padded(iter(range(4))) == [0, 1, 2, 3]
    assert padded(range(5)) == [0, 1, 2, 3, 4, 4, 4, 4]


def test_up_to_512_values_take_ten_lengths_and_keep_every_value() -> None:
    lengths = set()
    for n in range(1, 513):
        out = padded(range(n))
        assert set(out) == set(range(n))
        lengths.add(len(out))
    assert sorted(lengths) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
