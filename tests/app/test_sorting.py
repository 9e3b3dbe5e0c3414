"""One order, one number: the list is in the search's fused order with its rank shown (#); a
click on any header sorts by that column (strongest first, unknown last); '#' returns to the fused
order; the selected video stays selected; a new search starts in its own order."""

from PySide6.QtCore import QPoint, Qt

from tests.app.conftest import click_row, run_search


def click_header(qtbot, w, column):
    hh = w.table.horizontalHeader()
    w.table.scrollTo(w.model.index(0, column))
    x = hh.sectionViewportPosition(column) + hh.sectionSize(column) // 2
    qtbot.mouseClick(hh.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, hh.height() // 2))


def test_header_clicks_sort_and_hash_restores_the_fused_order(qtbot, window, library_copy):
    w = window
    w.open_library(str(library_copy))
    resp = run_search(qtbot, w, "a car cuts in from the right")
    m = w.model
    n = m.rowCount()
    assert n >= 3
    col = lambda c: [m.data(m.index(r, c)) for r in range(n)]  # noqa: E731
    assert col(m.C_THUMB) == [str(h.rank) for h in resp.hits] == [str(k + 1) for k in range(n)]
    click_row(qtbot, w, 2)
    chosen = m.hit(2).video_id
    # relevance: highest first, unknown ("–") last
    click_header(qtbot, w, m.C_RELEVANCE)
    rel = [m.hit(r).relevance for r in range(n)]
    known = [v for v in rel if v is not None]
    assert known == sorted(known, reverse=True) and rel[:len(known)] == known
    assert w.table.currentIndex().row() == m.row_of(chosen)        # the selection followed its video
    # again: the other way round, unknown still last
    click_header(qtbot, w, m.C_RELEVANCE)
    rel2 = [m.hit(r).relevance for r in range(n)]
    assert [v for v in rel2 if v is not None] == sorted(known) and rel2[len(known):] == [None] * (n - len(known))
    # rule score: strongest first
    click_header(qtbot, w, m.C_RULE)
    scores = [(m.hit(r).per_source.get("rule") or {}).get("score") for r in range(n)]
    ranked = [s for s, h in zip(scores, (m.hit(r) for r in range(n)))
              if (h.per_source.get("rule") or {}).get("rank")]
    assert ranked == sorted(ranked, reverse=True)
    # file name, then back to the fused order with '#'
    click_header(qtbot, w, m.C_FILE)
    names = col(m.C_FILE)
    assert names in (sorted(names, key=str.lower), sorted(names, key=str.lower, reverse=True))
    click_header(qtbot, w, m.C_THUMB)
    if col(m.C_THUMB) != [str(k + 1) for k in range(n)]:
        click_header(qtbot, w, m.C_THUMB)
    assert col(m.C_THUMB) == [str(k + 1) for k in range(n)]
    # a new search: its own order, whatever the list was sorted by
    click_header(qtbot, w, m.C_RELEVANCE)
    run_search(qtbot, w, "a car cuts in from the left")
    assert col(m.C_THUMB)[:3] == ["1", "2", "3"]
