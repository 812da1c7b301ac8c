"""Trace bundles: the files of each graph answer, kept in a folder beside the store
(``<store>/traces/<day>/<trace id>/``, owner-only) for ``trace_days`` days, and the two
downloads made from them.

Keeping a trace is a log write, like an access log: it never touches memory itself, so a
graph answer stays a read of the store. ``bundle_view`` holds what the asker was shown
(with the asker's copy of the meta); ``bundle_full`` adds the pre-selector's candidates,
the gate's arithmetic and the raw LLM answer, and is only ever made for an answer that
withheld and masked nothing (``why._downloads`` decides, and the decision is in the meta).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import threading
import time
import zipfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cairn.private_files import make_private_folder, write_private

__all__ = ["BUNDLE_FILES", "TraceFolder", "TraceRecord", "make_zip"]

# What each download holds, in this order; a file a trace does not have is left out.
BUNDLE_FILES = {
    "bundle_view": (
        "_meta.json", "envelope.json", "evidence_canonical.json", "response.json", "plan.json",
        "validator_report.json",
    ),
    "bundle_full": (
        "_meta.json", "envelope.json", "evidence_canonical.json", "response.json", "plan.json",
        "validator_report.json", "evidence_pre.json", "evidence_post.json", "prompt.json",
        "llm_raw.json",
    ),
}  # fmt: skip
_TRACE_ID = re.compile(r"^trc_[0-9A-HJKMNP-TV-Z]{26}$")
_DAY = re.compile(r"^\d{4}-\d\d-\d\d$")
# Old traces are pruned on a write at most this often.
PRUNE_EVERY_SECONDS = 3600.0


@dataclass(frozen=True)
class TraceRecord:
    trace_id: str
    owner: str
    scope: str
    files: dict[str, Any]


class TraceFolder:
    def __init__(self, root: Path, *, keep_days: int) -> None:
        self.root = root
        self.keep_days = keep_days
        self._lock = threading.Lock()
        self._pruned_at = 0.0

    def save(
        self, trace_id: str, *, owner: str, scope: str, files: dict[str, Any], now: datetime
    ) -> None:
        day = self.root / now.date().isoformat()
        make_private_folder(self.root)
        make_private_folder(day)
        folder = day / trace_id
        make_private_folder(folder)
        write_private(folder / "_owner.json", json.dumps({"owner": owner, "scope": scope}))
        for name, content in files.items():
            if name.startswith("_fingerprints"):
                continue
            write_private(folder / name, json.dumps(content, indent=2, ensure_ascii=False))
        self._prune(now)

    def load(self, trace_id: str) -> TraceRecord | None:
        if not _TRACE_ID.match(trace_id) or not self.root.is_dir():
            return None
        for day in sorted(self.root.iterdir(), reverse=True):
            folder = day / trace_id
            if _DAY.match(day.name) and folder.is_dir():
                owner = json.loads((folder / "_owner.json").read_text(encoding="utf-8"))
                files = {
                    path.name: json.loads(path.read_text(encoding="utf-8"))
                    for path in sorted(folder.iterdir())
                    if path.suffix == ".json" and path.name != "_owner.json"
                }
                return TraceRecord(trace_id, owner["owner"], owner["scope"], files)
        return None

    def _prune(self, now: datetime) -> None:
        with self._lock:
            if time.monotonic() - self._pruned_at < PRUNE_EVERY_SECONDS and self._pruned_at:
                return
            self._pruned_at = time.monotonic()
        oldest = (now - timedelta(days=self.keep_days)).date().isoformat()
        for day in self.root.iterdir():
            if _DAY.match(day.name) and day.name < oldest:
                shutil.rmtree(day, ignore_errors=True)


def make_zip(files: dict[str, Any], name: str) -> bytes:
    """The ``name`` download of a trace's ``files`` (the asker's meta as ``_meta.json``)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member in BUNDLE_FILES[name]:
            if member in files:
                content = json.dumps(files[member], indent=2, ensure_ascii=False, sort_keys=True)
                info = zipfile.ZipInfo(member, date_time=(2000, 1, 1, 0, 0, 0))
                archive.writestr(info, content)
    return buffer.getvalue()
