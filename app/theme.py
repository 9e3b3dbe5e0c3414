"""A calm dark-neutral palette and a small stylesheet (Fusion style)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

BG, BASE, ALT, TEXT, DIM, ACCENT = "#1b1e23", "#15181d", "#20242a", "#d7dae0", "#8a9099", "#4c9aff"

STYLE = f"""
QWidget {{ font-size: 10pt; }}
QLabel#dim {{ color: {DIM}; }}
QLabel#mono {{ font-family: 'DejaVu Sans Mono', monospace; }}
QLabel#notice {{ color: #f2c14e; padding: 2px 4px; }}
QLineEdit, QComboBox, QPlainTextEdit, QTableView, QTreeWidget, QListWidget {{
    border: 1px solid #2c3139; border-radius: 3px; }}
QComboBox#queryBar {{ font-size: 12pt; padding: 4px 6px; }}
QTableView {{ gridline-color: #262a31; selection-background-color: #2d4a72; }}
QHeaderView::section {{ background: {ALT}; color: {DIM}; border: none; padding: 3px 6px; }}
QTabBar::tab {{ padding: 5px 14px; }}
QToolBar {{ border: none; spacing: 4px; }}
QStatusBar {{ color: {DIM}; }}
QProgressBar {{ border: 1px solid #2c3139; border-radius: 3px; text-align: center; }}
QProgressBar::chunk {{ background: {ACCENT}; }}
"""


def apply_theme(app: QApplication) -> None:
    app.setStyle("Fusion")
    p = QPalette()
    for role, c in ((QPalette.ColorRole.Window, BG), (QPalette.ColorRole.Base, BASE),
                    (QPalette.ColorRole.AlternateBase, ALT), (QPalette.ColorRole.Text, TEXT),
                    (QPalette.ColorRole.WindowText, TEXT), (QPalette.ColorRole.Button, ALT),
                    (QPalette.ColorRole.ButtonText, TEXT), (QPalette.ColorRole.Highlight, "#2d4a72"),
                    (QPalette.ColorRole.HighlightedText, "#ffffff"),
                    (QPalette.ColorRole.ToolTipBase, ALT), (QPalette.ColorRole.ToolTipText, TEXT),
                    (QPalette.ColorRole.PlaceholderText, DIM), (QPalette.ColorRole.Link, ACCENT)):
        p.setColor(role, QColor(c))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#5b616b"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#5b616b"))
    app.setPalette(p)
    app.setStyleSheet(STYLE)
