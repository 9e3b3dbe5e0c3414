"""Layout at the screen sizes users have: 1920x1080, 1280x800 and 1024x680. After a search and a
click on a result, the timeline's signal plots have height to be read, the result list's columns
are reachable, and a screenshot of each size is written (tests/app/screenshots/layout_*.png)."""

import pytest

from tests.app.conftest import inspect_video, run_search, shot


@pytest.mark.parametrize("size", [(1920, 1080), (1280, 800), (1024, 680)])
def test_plots_visible_and_columns_reachable(qtbot, window, library_copy, size):
    w = window
    w.resize(*size)
    qtbot.wait(50)
    w.open_library(str(library_copy))
    run_search(qtbot, w, "a car cuts in from the right")
    inspect_video(qtbot, w, "gen_cutin_a")
    qtbot.wait(100)
    shot(w, f"layout_{size[0]}x{size[1]}")
    tl = w.timeline
    assert tl.isVisible() and tl.rows, "the timeline shows rows"
    heights = [r.plot.height() for r in tl.rows if r.plot.isVisible()]
    assert heights and min(heights) >= 30, f"plots squeezed to {heights} px at {size}"
    assert (w.width(), w.height()) == size, "the window fits the screen size asked for"
    assert w.player.height() >= 150
    # every column reachable: the table scrolls horizontally to the last one
    t = w.table
    last = w.model.columnCount() - 1
    t.scrollTo(w.model.index(0, last))
    qtbot.wait(20)
    rect = t.visualRect(w.model.index(0, last))
    assert rect.isValid() and rect.right() <= t.viewport().width() + 1
    mark = t.visualRect(w.model.index(0, w.model.C_MARK))
    t.scrollTo(w.model.index(0, 0))
    qtbot.wait(20)
    mark = t.visualRect(w.model.index(0, w.model.C_MARK))
    assert mark.right() <= t.viewport().width(), "the Mark column is in view without scrolling"
