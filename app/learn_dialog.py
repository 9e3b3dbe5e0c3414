"""What a refit from the marks found (`strived.learning.learn`): the numbers in use -> refitted,
the marked videos' ranks before and after, the held-out check; Keep (only when the check
accepted the new numbers) or Discard."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)


def figure(x) -> str:
    return "unknown" if x is None else f"{x:.3f}"


def rank_text(x) -> str:
    return "not ranked" if x is None else str(x)


def moved_text(before, after) -> str:
    """How a marked video moved: "up 3", "down 2", "same", "now ranked", "no longer ranked"."""
    if before is None and after is None:
        return "not ranked"
    if before is None:
        return "now ranked"
    if after is None:
        return "no longer ranked"
    d = before - after
    return "same" if d == 0 else (f"up {d}" if d > 0 else f"down {-d}")


def split_change(change: str) -> tuple[str, str, str]:
    """("gate accel lt", "-3", "-2.5") of an engine change line "gate accel lt: -3 -> -2.5"."""
    where, _, values = change.rpartition(": ")
    before, sep, after = values.partition(" -> ")
    return (where, before, after) if where and sep else (change, "", "")


def summary_text(res) -> str:
    n_vid = len({m["video_id"] for m in res.marks})
    used = f"learned version {res.current_version}" if res.current_version else "the shipped numbers"
    return (f"<b>{res.event}</b> ({res.profile} profile): {res.n_relevant} relevant and "
            f"{n_vid - res.n_relevant} not relevant marked videos ({len(res.marks)} marks); "
            f"numbers in use: {used}.")


def check_text(res) -> str:
    h = res.heldout
    return (f"AP on your marks: {figure(h.get('current_ap'))} with the numbers in use, "
            f"{figure(h.get('fit_ap'))} refitted. Held out (each marked video scored by numbers "
            f"refitted without it): {figure(h.get('heldout_ap'))}.")


def _table(parent, name: str, headers: list[str], rows: list[list[str]]) -> QTableWidget:
    t = QTableWidget(len(rows), len(headers), parent)
    t.setObjectName(name)
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            t.setItem(r, c, QTableWidgetItem(text))
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    return t


class LearnDialog(QDialog):
    """One refit's result. ``accept()`` (Keep) means: use the new numbers; ``reject()``
    (Discard, Esc, closing): change nothing."""

    def __init__(self, res, parent=None):
        super().__init__(parent)
        self.result = res
        self.setObjectName("learnDialog")
        self.setWindowTitle(f"Learned from your marks: {res.event}")
        lay = QVBoxLayout(self)
        self.summary = QLabel(summary_text(res), self, wordWrap=True)
        lay.addWidget(self.summary)
        for note in res.unused:
            lay.addWidget(QLabel(f"Not used: {note}", self, wordWrap=True, objectName="dim"))
        lay.addWidget(QLabel("<b>Numbers</b> (in use → refitted)" if res.changes else
                             "<b>Numbers</b>: no change", self))
        self.changes = _table(self, "learnChanges", ["number", "in use", "refitted"],
                              [list(split_change(c)) for c in res.changes])
        self.changes.setVisible(bool(res.changes))
        rows = sum(self.changes.rowHeight(r) for r in range(min(8, self.changes.rowCount())))
        self.changes.setMaximumHeight(self.changes.horizontalHeader().sizeHint().height() + rows
                                      + 2 * self.changes.frameWidth() + 2)
        lay.addWidget(self.changes)
        lay.addWidget(QLabel("<b>Your marked videos</b>: rank in this library's search before → "
                             "after", self))
        self.ranks = _table(self, "learnRanks", ["video", "your mark", "rank before", "rank after",
                                                  "moved"],
                            [[r["video_id"], "relevant" if r["relevant"] else "not relevant",
                              rank_text(r["before"]), rank_text(r["after"]),
                              moved_text(r["before"], r["after"])] for r in res.ranks])
        lay.addWidget(self.ranks, 1)
        self.check = QLabel(check_text(res), self, wordWrap=True, objectName="learnCheck")
        lay.addWidget(self.check)
        self.verdict = QLabel(("<b>Better:</b> " if res.accepted else "<b>Not better:</b> ")
                              + res.reason + ".", self, wordWrap=True, objectName="learnVerdict")
        lay.addWidget(self.verdict)
        bb = QDialogButtonBox(self)
        self.keep_button = QPushButton("Keep", self)
        self.keep_button.setEnabled(res.accepted)
        self.keep_button.setToolTip("Use these numbers when this library is searched for "
                                    f"{res.event} (“Undo learned numbers” goes back)" if res.accepted
                                    else "The held-out check did not accept these numbers: "
                                         "there is nothing to keep")
        self.discard_button = QPushButton("Discard", self)
        self.discard_button.setToolTip("Change nothing")
        bb.addButton(self.keep_button, QDialogButtonBox.ButtonRole.AcceptRole)
        bb.addButton(self.discard_button, QDialogButtonBox.ButtonRole.RejectRole)
        (self.keep_button if res.accepted else self.discard_button).setDefault(True)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)
        self.resize(720, 560)
