"""tidemq.Data's names and SendMessage's duplicates trailer."""

from tidemq.protocol.data import (DUPLICATES_TRAILER, PULL_RECORDS_PATH, SEND_RECORDS_PATH, duplicates_of,
                                  duplicates_trailer)


def test_method_paths():
    assert (SEND_RECORDS_PATH, PULL_RECORDS_PATH) == ("/tidemq.Data/SendRecords", "/tidemq.Data/PullRecords")


def test_the_duplicates_trailer_round_trips_and_is_absent_when_none():
    assert duplicates_trailer([]) == ()
    md = duplicates_trailer([0, 3])
    assert md == ((DUPLICATES_TRAILER, "0,3"),)
    assert duplicates_of([("other", "1"), *md]) == {0, 3}
    assert duplicates_of(None) == duplicates_of([]) == frozenset()


def test_a_trailer_that_is_not_indexes_names_none():
    assert duplicates_of([(DUPLICATES_TRAILER, "0,x")]) == frozenset()
    assert duplicates_of([(DUPLICATES_TRAILER, b"0")]) == frozenset()
