"""The web console: curators review, approve, reject and audit in a browser; everyone
browses what they may read. Served under ``/ui`` by ``cairn serve``."""

from cairn.doors.web.app import UI_PREFIX, build_web_app, mount_console

__all__ = ["UI_PREFIX", "build_web_app", "mount_console"]
