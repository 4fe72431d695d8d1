"""The store's topic calls (MessageStore's part for topics.py): create, delete, settings, the
space policy, the queues puts go to. Changes go through the writer (writer.py: under the put lock)."""

from __future__ import annotations


class StoreTopics:
    """MessageStore's topic calls (a part of its class: store.py builds what they use)."""

    def create_topic(self, name: str, queue_count: int | None = None, space_policy: str | None = None,
                     message_type: str | None = None) -> None:
        """Create a topic, grow its queue count, or set its space policy ("evict" / "refuse",
        topics.SpacePolicy) or message type ("normal", "fifo", "delay", "transaction", "mixed":
        topics.MessageKind); None: a new topic's is evict / mixed, an existing one's stays.
        ValueError: not a topic name, too many queues, not a policy, not a message type."""
        self._running("create_topic")
        self.writer.create_topic(name, queue_count or self.config.topic_queues_default, space_policy,
                                 message_kind=message_type)

    def message_type(self, topic: str) -> str | None:
        """A topic's message type (topics.MessageKind's value), None if there is no such topic."""
        t = self.topics.get(topic)
        return t.message_kind.value if t is not None else None

    def topic_settings(self, topic: str):
        """A topic's own settings (topics.TopicSettings), None if there is no such topic."""
        self._running("topic_settings")
        t = self.topics.get(topic)
        return t.settings if t is not None else None

    def set_topic_settings(self, topic: str, changes: dict):
        """Change some of a topic's own settings (retention_hours, retention_bytes, max_message_bytes;
        None: the store's again), saved before it returns: the new TopicSettings. KeyError: no such
        topic; ValueError: a setting it does not have, or a value outside its bounds."""
        self._running("set_topic_settings")
        t = self.topics.get(topic)
        if t is None:
            raise KeyError(topic)
        return self.topics.set_settings(topic, t.settings.changed(changes, self.config.message_body_bytes_max))

    def space_policy(self, topic: str) -> str | None:
        """A topic's space policy ("evict" / "refuse"), None if there is no such topic."""
        self._running("space_policy")
        t = self.topics.get(topic)
        return t.space_policy.value if t is not None else None

    def delete_topic(self, name: str, log_end: int | None = None) -> dict | None:
        """Delete a topic (mqadmin deleteTopic): its queues go at once, its records stay in the log,
        dead, until cleanup; a topic of that name created later starts empty. None if unknown.
        ``log_end``: where its records end (a follower copying its leader's deletion)."""
        self._running("delete_topic")
        return self.writer.delete_topic(name, log_end)

    def set_write_queues(self, name: str, queue_ids) -> None:
        """The queues of ``name`` puts without a queue id go to (None: all): a topic spread over several
        broker groups takes puts in the queues this store's group owns. ValueError: no such queue."""
        self._running("set_write_queues")
        t = self.topics.get(name)
        if t is None:
            raise ValueError(f"topic {name!r} does not exist")
        self.create_spread_topic(name, t.queue_count, queue_ids)

    def create_spread_topic(self, name: str, queue_count: int, queue_ids) -> None:
        """Create ``name`` with (at least) ``queue_count`` queues whose puts without a queue id go to
        ``queue_ids`` (None: all), set together: no put falls between (a topic spread over groups)."""
        self._running("create_spread_topic")
        count = max(queue_count, self.queue_count(name))
        ids = range(count) if queue_ids is None else tuple(sorted(set(queue_ids)))
        if not ids or any(not 0 <= q < count for q in ids):
            raise ValueError(f"queues {list(ids)} are not queues of {name!r} ({count})")
        self.writer.create_topic(name, count, write_ids=ids)

    def write_queues(self, name: str):
        """The queues of ``name`` puts without a queue id go to (see set_write_queues)."""
        self._running("write_queues")
        t = self.topics.get(name)
        return t.write_ids if t is not None else range(0)

    def topic_names(self) -> list[str]:
        self._running("topic_names")
        return sorted(self.topics.topics)

    def queue_count(self, topic: str) -> int:
        self._running("queue_count")
        t = self.topics.get(topic)
        return t.queue_count if t else 0
