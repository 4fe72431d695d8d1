"""StreamLimits (protection/streams.py): counted per connection and per user, room made by leave."""

from tidemq.broker.protection.streams import StreamLimits


def test_bounds_per_connection_and_per_user_and_leave_makes_room():
    s = StreamLimits(per_connection_max=2, per_user_max=3)
    assert s.enter("ipv4:1.1.1.1:1", "u") is None and s.enter("ipv4:1.1.1.1:1", "u") is None
    assert "streams_per_connection_max=2" in s.enter("ipv4:1.1.1.1:1", "u")
    assert s.enter("ipv4:1.1.1.1:2", "u") is None
    assert "streams_per_user_max=3" in s.enter("ipv4:1.1.1.1:2", "u")
    assert s.by_peer == {"ipv4:1.1.1.1:1": 2, "ipv4:1.1.1.1:2": 1}, "a refusal counts nothing"
    assert s.enter("ipv4:1.1.1.1:2", "v") is None, "another user"
    assert s.enter("ipv4:1.1.1.1:3", None) is None, "authentication off: the connection only"
    s.leave("ipv4:1.1.1.1:1", "u")
    assert s.enter("ipv4:1.1.1.1:1", "u") is None
    for peer, user in (("ipv4:1.1.1.1:1", "u"), ("ipv4:1.1.1.1:1", "u"), ("ipv4:1.1.1.1:2", "u"),
                       ("ipv4:1.1.1.1:2", "v"), ("ipv4:1.1.1.1:3", None)):
        s.leave(peer, user)
    assert s.by_peer == {} and s.by_user == {} and s.refused == 2, "nothing left behind"
