"""The installed PySide6 keeps None's reference count: PySide6 6.12.0 on CPython 3.11 takes one
reference from None per call of a void Qt method, and the process aborts ("deallocating None")
after some thousands of calls (why pyproject.toml pins PySide6 < 6.12)."""

import sys

from PySide6.QtWidgets import QLabel


def test_void_qt_calls_do_not_consume_references_to_none(qapp):
    label = QLabel("x")
    before = sys.getrefcount(None)
    for _ in range(2000):
        label.setVisible(False)
    lost = before - sys.getrefcount(None)
    assert lost < 100, f"None lost {lost} references over 2000 void Qt calls: use PySide6 < 6.12 on Python 3.11"
