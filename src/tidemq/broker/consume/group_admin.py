"""The admin methods of consumer-group settings (CreateGroup, UpdateGroup, DeleteGroup: protocol/admin.py)
over the broker's GroupTable (groups.py), and what Groups shows of them. Who may call them is checked
before (protection/access.py: group:G create / update / delete)."""

from __future__ import annotations

from ...protocol import admin as api
from ...protocol.group_settings import changes_of, check_name
from .groups import GroupTable


def _request(req) -> tuple[str, dict]:
    if not isinstance(req, dict):
        raise ValueError("a request is a JSON object")
    unknown = set(req) - {"group", "retry_max", "retry_policy", "orderly", "consume_enable"}
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    return check_name(req.get("group")), changes_of(req)


def _no_table() -> dict:
    return api.refused("this admin service has no broker (consumer-group settings live in the broker's state)",
                       api.Refusal.FORBIDDEN)


def create(table: GroupTable | None, req) -> dict:
    if table is None:
        return _no_table()
    try:
        group, changes = _request(req)
        s = table.create(group, changes)
    except KeyError:
        return api.refused(f"group {req.get('group')!r} has settings already: tidemq group update",
                           api.Refusal.EXISTS)
    except OverflowError as e:
        return api.refused(str(e), api.Refusal.LIMIT_EXCEEDED)
    except ValueError as e:
        return api.refused(str(e))
    return {"ok": True, "group": group, "settings": s.document()}


def update(table: GroupTable | None, req) -> dict:
    if table is None:
        return _no_table()
    try:
        group, changes = _request(req)
        if not changes:
            raise ValueError("nothing to change: give retry_max, retry_policy, orderly or consume_enable")
        s = table.update(group, changes)
    except KeyError:
        return api.refused(f"group {req.get('group')!r} has no settings: tidemq group create",
                           api.Refusal.NOT_FOUND)
    except ValueError as e:
        return api.refused(str(e))
    return {"ok": True, "group": group, "settings": s.document()}


def delete(table: GroupTable | None, req) -> dict:
    if table is None:
        return _no_table()
    try:
        group, changes = _request(req)
        if changes:
            raise ValueError("DeleteGroup takes only the group")
        table.delete(group)
    except KeyError:
        return api.refused(f"group {req.get('group')!r} has no settings", api.Refusal.NOT_FOUND)
    except ValueError as e:
        return api.refused(str(e))
    return {"ok": True, "group": group}


def shown(table: GroupTable | None, group: str | None) -> dict:
    """What Groups answers of the settings: the group's (its own or the defaults) when it names one."""
    if table is None or group is None:
        return {}
    return {"settings": table.settings(group).document(), "created": group in table.groups}
