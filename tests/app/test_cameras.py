"""Library → Cameras… (issue 32): the library's camera groups with their evidence and estimated
values; a user gives a known height, sees how many videos the next index perceives again, is
told at the field when a value is out of range, clears it, merges and splits groups; a read-only
library shows its groups with editing off."""

import os

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.app.conftest import activate, click_menu_action, clip_records, shot, type_text


@pytest.fixture()
def camera_library(tmp_path, clips_dir):
    """The 3 generated clips (three file-name shapes: three camera groups), indexed: each has a
    done files row, as `strived index` leaves it."""
    from strived.store.library import Library

    recs = [clip_records(vid, p, boxes, 20.0, cut) for vid, (p, boxes, cut) in clips_dir[1].items()]
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(recs)
    with lib.transaction():
        for r in recs:
            lib.conn.execute("INSERT INTO files(path, video_id, size, mtime, hash, status) "
                             "VALUES (?,?,?,?,?,?)", (r.info.path, r.info.id, os.path.getsize(r.info.path),
                                                      os.path.getmtime(r.info.path), "h" + r.info.id, "done"))
    lib.close()
    return tmp_path / "lib"


def _open_cameras(qtbot, w):
    """Library → Cameras… with clicks on the menu bar and the menu."""
    if QApplication.activeWindow() is not w:
        activate(qtbot, w)
    mb = w.menuBar()
    act = next(a for a in mb.actions() if a.text().replace("&", "") == "Library")
    qtbot.mouseClick(mb, Qt.MouseButton.LeftButton, pos=mb.actionGeometry(act).center())
    click_menu_action(qtbot, act.menu(), "Cameras")
    qtbot.waitUntil(lambda: getattr(w, "cameras_dialog", None) is not None, timeout=3000)
    dlg = w.cameras_dialog
    qtbot.waitUntil(lambda: dlg.info is not None and not dlg.busy, timeout=20000)
    return dlg


def _click_group(qtbot, dlg, row, modifier=Qt.KeyboardModifier.NoModifier):
    rect = dlg.table.visualRect(dlg.table.model().index(row, 0))
    qtbot.mouseClick(dlg.table.viewport(), Qt.MouseButton.LeftButton, modifier, rect.center())


def _apply(qtbot, dlg):
    with qtbot.waitSignal(dlg.shown, timeout=20000):
        qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)


def _stored(folder):
    """The groups as the engine reads them from the library on disk."""
    from strived.store import cameras
    from strived.store.library import Library

    with Library.open(folder) as lib:
        return {c["id"]: c for c in cameras.cameras(lib)}


def test_cameras_dialog_sets_a_height_refuses_a_bad_one_merges_and_splits(qtbot, window,
                                                                         camera_library):
    w = window
    assert w.open_library(str(camera_library))
    dlg = _open_cameras(qtbot, w)
    assert dlg.table.rowCount() == 3
    names = {dlg.table.item(r, 5).text() for r in range(3)}
    assert names == {"name:gen_cutin_a", "name:gen_cutin_b", "name:gen_plain"}
    assert {dlg.table.item(r, 2).text() for r in range(3)} == {"640x360"}
    assert "Estimated from its clips:" in dlg.details.toPlainText()
    assert "unknown: no clip measured it" in dlg.details.toPlainText()   # the records carry none
    # 1. select the second group, type a height of 1.6, apply
    with qtbot.waitSignal(dlg.shown, timeout=20000):
        _click_group(qtbot, dlg, 1)
    gid = dlg.info["id"]
    assert dlg.table.item(1, 0).text().startswith(f"{gid}:")
    assert dlg.videos.count() == 1
    type_text(qtbot, dlg.fields["camera_height_m"], "1.6")
    _apply(qtbot, dlg)
    assert "1 video of this camera will be perceived again by the next index" in dlg.notice.text()
    assert _stored(camera_library)[gid]["known"] == {"camera_height_m": 1.6}
    assert dlg.table.item(1, 7).text() == "camera_height_m=1.6"
    # 2. an out-of-range height: the engine's message under the field, nothing stored
    type_text(qtbot, dlg.fields["camera_height_m"], "9")
    qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)
    err = dlg.errors["camera_height_m"]
    assert err.isVisible() and err.text() == "camera_height_m must be between 0.3 and 5, found 9"
    assert err.parent() is dlg.fields["camera_height_m"].parent()        # at the field
    assert not dlg.errors["focal_px"].isVisible()
    assert "Nothing was changed" in dlg.notice.text()
    shot(dlg, "cameras_dialog_bad_height")
    assert _stored(camera_library)[gid]["known"] == {"camera_height_m": 1.6}
    # 3. clear it: the field emptied, applied
    type_text(qtbot, dlg.fields["camera_height_m"], "")
    qtbot.keyClick(dlg.fields["camera_height_m"], Qt.Key.Key_Delete)
    _apply(qtbot, dlg)
    assert not err.isVisible()
    assert _stored(camera_library)[gid]["known"] == {}
    assert "No video of this camera will be perceived again" in dlg.notice.text()
    # 4. merge: the first group, Ctrl+click the second, Merge
    with qtbot.waitSignal(dlg.shown, timeout=20000):
        _click_group(qtbot, dlg, 0)
    first = dlg.info["id"]
    _click_group(qtbot, dlg, 1, Qt.KeyboardModifier.ControlModifier)
    assert dlg.selected_groups() == [first, gid] and dlg.merge_button.isEnabled()
    with qtbot.waitSignal(dlg.shown, timeout=20000):
        qtbot.mouseClick(dlg.merge_button, Qt.MouseButton.LeftButton)
    groups = _stored(camera_library)
    assert gid not in groups and len(groups[first]["videos"]) == 2
    assert dlg.table.rowCount() == 2 and dlg.info["id"] == first and dlg.videos.count() == 2
    # 5. split one video off into a group of its own
    item = dlg.videos.item(1)
    vid = item.data(Qt.ItemDataRole.UserRole)
    qtbot.mouseClick(dlg.videos.viewport(), Qt.MouseButton.LeftButton,
                     pos=dlg.videos.visualItemRect(item).center())
    assert dlg.split_button.isEnabled()
    with qtbot.waitSignal(dlg.shown, timeout=20000):
        qtbot.mouseClick(dlg.split_button, Qt.MouseButton.LeftButton)
    groups = _stored(camera_library)
    new = dlg.info["id"]
    assert len(groups) == 3 and [v["video_id"] for v in groups[new]["videos"]] == [vid]
    assert groups[new]["videos"][0]["by"] == "user"
    assert "split off camera group" in dlg.notice.text()
    shot(dlg, "cameras_dialog")


def test_cameras_dialog_on_a_read_only_library_shows_and_does_not_edit(qtbot, window,
                                                                       camera_library,
                                                                       monkeypatch):
    from strived.cli import main

    assert main(["camera", "list", "--library", str(camera_library)]) == 0   # groups stored
    # the disk as read-only (root ignores permission bits): the engine's own write check says no
    monkeypatch.setattr("strived.store.library._can_write", lambda folder, db: False)
    w = window
    assert w.open_library(str(camera_library))
    assert w.library.readonly
    dlg = _open_cameras(qtbot, w)
    assert dlg.table.rowCount() == 3
    assert dlg.readonly_label.isVisible() and "read-only" in dlg.readonly_label.text()
    assert "no write permission" in dlg.readonly_label.text()
    for wdg in (dlg.apply_button, dlg.fields["camera_height_m"], dlg.name_edit,
                dlg.merge_button, dlg.split_button):
        assert not wdg.isEnabled()
    before = _stored(camera_library)
    qtbot.mouseClick(dlg.apply_button, Qt.MouseButton.LeftButton)       # disabled: nothing
    assert _stored(camera_library) == before
