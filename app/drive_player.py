"""Playing an event across a file boundary (a merged hit: `strived.drive_hits`): at the end of one
file of the drive the player goes on into the next file's first frame, at its start back into the
previous file's last frame, by stepping or while playing (the files follow each other in drive
time: `strived drives` shows each gap). Each file's own part of the event is the interval on its
seek bar; box overlays are kept per file (the inspected file's come from its records)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from .frames import BoxOverlay

class DrivePlayback(QObject):
    """Follows ``player.edge_reached`` through the parts of one merged hit."""

    file_changed = Signal(int, str)          # part index, video id

    def __init__(self, player):
        super().__init__(player)
        self.player = player
        self.parts: list[dict] = []
        self.index = 0
        self._overlays: dict[int, object] = {}
        player.edge_reached.connect(self._on_edge)

    def set_hit(self, hit) -> None:
        """Follow the drive parts of ``hit`` (none: a hit inside one file), the player being on
        the hit's own file."""
        drive = getattr(hit, "drive", None) or {}
        parts = [p for p in drive.get("parts") or [] if p.get("path")]
        self.parts, self._overlays = (parts if len(parts) > 1 else []), {}
        ids = [p["video_id"] for p in self.parts]
        self.index = ids.index(hit.video_id) if hit is not None and hit.video_id in ids else 0

    @property
    def video_id(self) -> str | None:
        return self.parts[self.index]["video_id"] if self.parts else None

    def _on_edge(self, direction: int, playing: bool) -> None:
        k = self.index + direction
        if not self.parts or not 0 <= k < len(self.parts):
            return
        p, pl = self.parts[k], self.player
        self._overlays[self.index] = pl.overlay_data
        if not pl.load(p["path"], span_s=(float(p["t0"]), float(p["t1"])), start_at_span=False):
            return
        self.index = k
        pl.overlay_data = self._overlays.get(k) or BoxOverlay()
        if direction < 0:
            pl.seek(pl.n_frames - 1)
        self.file_changed.emit(k, p["video_id"])
        if playing:
            pl.play()


def follow_drive(player, hit) -> DrivePlayback:
    """The player's drive follower (made on first use), set to ``hit``."""
    dp = getattr(player, "_drive_playback", None)
    if dp is None:
        dp = player._drive_playback = DrivePlayback(player)
    dp.set_hit(hit)
    return dp
