"""broker/consume/positions.py: what each group has consumed of a topic, from the committed offsets
(pull consumers) and the pop state (receive and ack), the lower where a group does both; other
topics and queues nobody touched are left out."""

from tidemq.broker.consume.group_offsets import GroupOffsets
from tidemq.broker.consume.pop_state import PopState
from tidemq.broker.consume.positions import consumed_positions
from tidemq.io import OsFileIO

FAR_MS = 1 << 50


def parts(tmp_path):
    offsets = GroupOffsets(OsFileIO(), str(tmp_path))
    pop = PopState(OsFileIO(), str(tmp_path))
    pop.open()
    return offsets, pop


def test_nobody_subscribed_is_an_empty_map(tmp_path):
    offsets, pop = parts(tmp_path)
    assert consumed_positions(offsets, pop, "T") == {}
    pop.close()


def test_committed_offsets_of_the_topic_only(tmp_path):
    offsets, pop = parts(tmp_path)
    offsets.set("g", "T", 0, 5)
    offsets.set("g", "T", 3, 1)
    offsets.set("g", "Other", 0, 9)
    offsets.set("h", "Other", 1, 2)
    assert consumed_positions(offsets, pop, "T") == {"g": {0: 5, 3: 1}}
    assert consumed_positions(offsets, pop, "Other") == {"g": {0: 9}, "h": {1: 2}}
    pop.close()


def test_a_pop_group_counts_from_its_lowest_message_in_flight(tmp_path):
    offsets, pop = parts(tmp_path)
    handles = [pop.deliver("p", "T", 1, o, 1, FAR_MS) for o in range(4)]
    assert consumed_positions(offsets, pop, "T") == {"p": {1: 0}}, "nothing acked: nothing consumed"
    pop.ack("p", handles[0])
    pop.ack("p", handles[2])
    assert consumed_positions(offsets, pop, "T") == {"p": {1: 1}}, "offset 1 is still in flight"
    pop.ack("p", handles[1])
    pop.ack("p", handles[3])
    assert consumed_positions(offsets, pop, "T") == {"p": {1: pop.state("p", "T", 1).cursor}}
    assert pop.state("p", "T", 1).cursor == 4
    pop.close()


def test_a_group_consuming_both_ways_counts_by_the_lower(tmp_path):
    offsets, pop = parts(tmp_path)
    offsets.set("g", "T", 0, 7)
    offsets.set("g", "T", 1, 2)
    for o in range(5):
        pop.ack("g", pop.deliver("g", "T", 0, o, 1, FAR_MS))
        pop.ack("g", pop.deliver("g", "T", 1, o, 1, FAR_MS))
    assert consumed_positions(offsets, pop, "T") == {"g": {0: 5, 1: 2}}
    pop.close()
