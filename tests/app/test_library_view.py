"""Browse the library before any search: the Library tab lists every video with its thumbnail,
duration, what was found and whether the ego speed is known; the filter narrows it; a double-click
plays the video in Inspect with its tracked boxes."""

from PySide6.QtCore import Qt

from tests.app.conftest import shot


def test_library_tab_lists_filters_and_opens_a_video(qtbot, window, library_copy):
    w = window
    assert w.open_library(str(library_copy))
    lv = w.library_view
    qtbot.waitUntil(lambda: lv.table.rowCount() == len(w.library), timeout=10000)
    assert w.tabs.currentWidget() is lv                      # no search yet: the library is shown
    assert w.response is None and f"{len(w.library)} video" in lv.title.text()
    t = lv.table
    files = [t.item(r, 1).text() for r in range(t.rowCount())]
    assert any(f.endswith(".mp4") for f in files)
    found = [t.item(r, 3).text() for r in range(t.rowCount())]
    assert all(f for f in found) and any("car" in f for f in found)
    assert all(t.item(r, 4).text() for r in range(t.rowCount()))     # known / unknown / –, never blank
    # the filter: type into it as a user does
    lv.filter.setFocus()
    qtbot.keyClicks(lv.filter, "cutin")
    shown = [r for r in range(t.rowCount()) if not t.isRowHidden(r)]
    assert shown and all("cutin" in t.item(r, 1).text().lower() for r in shown)
    shot(w, "library_tab_list")
    # a double-click on a video with a file: Inspect plays it with its boxes
    row = next(r for r in shown if t.item(r, 1).text().endswith(".mp4"))
    vid = lv.video_at(row)
    rect = t.visualItemRect(t.item(row, 1))
    with qtbot.waitSignal(w.browsed, timeout=20000):
        # a real double-click: press, release, then the double-click event
        qtbot.mouseClick(t.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        qtbot.mouseDClick(t.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert w.tabs.currentIndex() == 0
    qtbot.waitUntil(lambda: w.player.canvas.image is not None, timeout=10000)
    assert w.player.overlay_data is not None and "no search yet" in w.timeline.title.text().lower()
    assert vid in w.timeline.title.text()
    shot(w, "library_tab_browse")
