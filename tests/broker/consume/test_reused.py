"""reused_from: where a position counts a record a failure of the log took (consume/reused.py)."""

from tidemq.broker.consume.reused import reused_from

# a queue whose offsets 0..2 lie before the failure's durable end, 3.. after where the log resumed
UNITS = {0: 100, 1: 200, 2: 300, 3: 10_000, 4: 10_100, 5: 10_200, 6: 10_300}


def test_the_same_record_at_the_fingerprinted_offset_leaves_the_position():
    assert reused_from(UNITS.get, (2, 300), 3) is None
    assert reused_from(UNITS.get, None, 5) is None


def test_another_record_there_cuts_back_to_the_first_offset_past_the_counted_one():
    # the position counted offsets 0..5 of the old log, records 3..5 at 400, 500, 600 (taken)
    assert reused_from(UNITS.get, (5, 600), 6) == 3
    assert reused_from(UNITS.get, (3, 400), 4) == 3


def test_a_record_cleaned_away_or_none_to_read_leaves_the_position():
    assert reused_from(lambda o: -1, (2, 300), 3) is None
    assert reused_from(lambda o: None, (2, 300), 3) is None


def test_records_cleaned_below_the_cut_do_not_pull_it_lower():
    units = {0: -1, 1: -1, 2: 300, 3: 10_000, 4: 10_100}
    assert reused_from(units.get, (4, 600), 5) == 3
