"""One presenter for every error the app shows: a clear message where the user looks, details on
demand, and a "Copy details" button (the traceback and context) for bug reports."""

from __future__ import annotations

import traceback

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QLabel, QPlainTextEdit,
                               QPushButton, QVBoxLayout, QWidget)

from strived.api import StrivedError

def user_message(exc: BaseException) -> str:
    """A message a user can act on: engine errors already carry one; others get a plain summary."""
    if isinstance(exc, StrivedError):
        return str(exc)
    if isinstance(exc, PermissionError):
        return f"Permission denied: {exc.filename or exc}. Choose a folder you can write to."
    if isinstance(exc, FileNotFoundError):
        return f"File not found: {exc.filename or exc}"
    if isinstance(exc, OSError) and exc.errno == 28:
        return "The disk is full. Free some space and try again; nothing was written."
    if isinstance(exc, MemoryError):
        return "Out of memory."
    return f"Unexpected error ({type(exc).__name__}): {exc}"


class ErrorDialog(QDialog):
    """A non-modal error box: message, expandable details, Copy details, Close."""

    def __init__(self, title: str, message: str, details: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("errorDialog")
        self.message_label = QLabel(message, self)
        self.message_label.setWordWrap(True)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details = QPlainTextEdit(details, self)
        self.details.setReadOnly(True)
        self.details.setVisible(False)
        self.details.setMinimumHeight(160)
        self.details_button = QPushButton("Show details", self)
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._on_details_toggled)
        self.copy_button = QPushButton("Copy details", self)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.addButton(self.details_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        head = QLabel(f"<b>{title}</b>", self)
        lay.addWidget(head)
        lay.addWidget(self.message_label)
        lay.addWidget(self.details, 1)
        lay.addWidget(buttons)
        self.resize(520, 180)
        self.full_details = f"{title}\n{message}\n\n{details}"

    def _on_details_toggled(self, on: bool) -> None:
        self.details.setVisible(on)
        self.details_button.setText("Hide details" if on else "Show details")
        self.adjustSize()

    def _on_copy_clicked(self) -> None:
        QApplication.clipboard().setText(self.full_details)


class ErrorPresenter(QObject):
    """Receives every error; shows it in the status area (notice) or a dialog (failure)."""

    presented = Signal(str, str)      # title, message
    noticed = Signal(str)             # a non-blocking notice for the status area

    def __init__(self, parent_widget: QWidget | None = None, *, dialogs: bool = True):
        super().__init__(parent_widget)
        self.parent_widget = parent_widget
        self.dialogs = dialogs
        self.last_dialog: ErrorDialog | None = None
        self.history: list[tuple[str, str]] = []

    def present(self, title: str, exc: BaseException | str, details: str | None = None,
                context: str = "") -> str:
        if isinstance(exc, BaseException):
            message = user_message(exc)
            if details is None:
                details = "".join(traceback.format_exception(exc))
        else:
            message, details = str(exc), details or ""
        if context:
            details = f"context: {context}\n{details}"
        self.history.append((title, message))
        self.presented.emit(title, message)
        if self.dialogs:
            if self.last_dialog is not None:
                self.last_dialog.close()
            self.last_dialog = ErrorDialog(title, message, details, self.parent_widget)
            self.last_dialog.show()
        return message

    def notice(self, message: str) -> None:
        self.history.append(("notice", message))
        self.noticed.emit(message)
