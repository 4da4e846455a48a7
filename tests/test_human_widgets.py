"""The annotation widgets, driven in-process: traits set, handlers called (no browser)."""

from __future__ import annotations

from pathlib import Path

import ipywidgets as W
import pytest

from capaudit.human.simulate import fixture_study
from capaudit.human.widgets import AnnotationApp, KeyCapture, annotation_app, highlight_caption, load_image


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def tick(self, s: float = 1.0) -> None:
        self.t += s


@pytest.fixture()
def app_env(tmp_path: Path):
    st, people, _ = fixture_study(tmp_path, n_images=16, humans=1, labels_per_item=1, missing_images=2,
                                  claims_per_stratum=2)
    clock = Clock()
    app = AnnotationApp(st, clock=clock)
    yield st, people[0].code, app, clock
    st.close()


def _key(app: AnnotationApp, key: str, clock: Clock) -> None:
    clock.tick()
    app._on_msg(app.keys, {"kind": "key", "key": key, "screen": app.keys.screen}, [])


def _login(app: AnnotationApp, code: str) -> None:
    app.code.value = code
    app.start.click()
    app.body.children[-1].click()  # consent


def _count(st) -> int:
    return st.store.one("SELECT COUNT(*) AS k FROM annotations")["k"]


def test_highlight_and_image_helpers(tmp_path: Path) -> None:
    assert highlight_caption("a <red> car", (3, 6)) == 'a &lt;<mark class="capaudit-claim">red</mark>&gt; car'
    assert highlight_caption("a car", None) == "a car"
    assert highlight_caption("a car", (3, 99)) == "a car"
    assert load_image(str(tmp_path / "missing.jpg")) is None
    (tmp_path / "bad.jpg").write_bytes(b"not an image")
    assert load_image(str(tmp_path / "bad.jpg")) is None


def test_login_errors_are_shown_not_raised(app_env) -> None:
    st, code, app, clock = app_env
    app.code.value = "WRONG-CODE"
    app.start.click()
    assert "not invited" in app.status.value and app.session is None
    _login(app, code)
    assert app.task is not None and app.task.phase == "caption" and app.task.position == 0


def test_keyboard_and_mouse_record_one_judgment_each(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    assert app.keys.capture_keys[:3] == ["1", "2", "3"] and "Backspace" in app.keys.capture_keys
    first = app.task
    for k in "111":  # yes, yes, correct
        _key(app, k, clock)
    assert _count(st) == 1 and app.task.position == 1
    saved = app.session.saved(first.item_id, "caption")
    assert saved.values["caption_licensed"] == "yes" and saved.values["category_check"] == "correct"
    assert saved.elapsed_ms == 3000  # three ticks of the fake clock
    # mouse: incorrect category asks for the corrected one before saving
    clock.tick()
    app.option_buttons["caption_licensed"][1].click()
    clock.tick()
    app.option_buttons["atomic_visual_claim"][0].click()
    clock.tick()
    app.option_buttons["category_check"][1].click()
    assert _count(st) == 1 and app.order[-1] == "corrected_category"
    clock.tick()
    app.option_buttons["corrected_category"][0].click()
    assert _count(st) == 2 and app.task.position == 2
    assert "saved" in app.status.value


def test_double_click_records_one_judgment(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    for name in ("caption_licensed", "atomic_visual_claim"):
        clock.tick()
        app.option_buttons[name][0].click()
    clock.tick()
    button = app.option_buttons["category_check"][0]
    button.click()
    button.click()  # second click of a double click: its screen is gone
    assert _count(st) == 1 and app.ignored == 1
    # a click landing on the next screen's buttons within the debounce window is ignored too
    app.option_buttons["caption_licensed"][0].click()
    assert app.draft == {} and app.ignored == 2
    # a stale key message (made on the previous screen) is ignored
    app._on_msg(app.keys, {"kind": "key", "key": "1", "screen": "old-screen"}, [])
    assert app.ignored == 3 and _count(st) == 1


def test_back_within_phase_shows_and_revises_saved_answer(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    for k in "111":
        _key(app, k, clock)
    assert app._prev_index() == 0
    _key(app, "Backspace", clock)
    assert app.task.position == 0 and app.saved is not None and "saved" in app.item_state.value
    assert app.option_buttons["caption_licensed"][0].button_style == "primary"
    _key(app, "Enter", clock)  # keep: no new revision
    assert app.task.position == 1 and _count(st) == 1
    _key(app, "ArrowLeft", clock)
    for k in "211":  # walk the saved screen, change the first answer
        _key(app, k, clock)
    assert _count(st) == 2 and app.session.saved(app.tasks[0].item_id, "caption").revision == 2
    assert app.task.position == 1
    _key(app, "Backspace", clock)
    _key(app, "Backspace", clock)  # first item of the phase: nothing before it
    assert app.task.position == 0


def test_resume_after_restart_at_first_unanswered(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    for _ in range(3):
        for k in "111":
            _key(app, k, clock)
    fresh = AnnotationApp(st, clock=clock)  # a kernel restart / reload / second browser
    fresh.code.value = code
    fresh.start.click()
    assert fresh.task.phase == "caption" and fresh.task.position == 3  # no consent screen the second time
    assert fresh.session.progress().done == 3


def test_image_phase_missing_image_and_optional_fields(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    n_cap = sum(1 for t in app.tasks if t.phase == "caption")
    for _ in range(n_cap):
        for k in "111":
            _key(app, k, clock)
    assert app.task.phase == "image"
    seen_missing = seen_ok = False
    while app.task is not None and app.task.phase == "image":
        choices = app._choices("image_support")
        if app.image_ok:
            seen_ok = True
            assert len(choices) == 6 and isinstance(app.body.children[2], W.Image)
            app.confidence.value = 4
            app.tag_buttons["occluded"].value = True
            app.note.value = "contact me at x@y.org"
            _key(app, "1", clock)
            assert "e-mail address" in app.status.value  # screened, not saved, UI still there
            assert app.note.value == "contact me at x@y.org" and app.confidence.value == 4
            app.note.value = "sign partly hidden"
            _key(app, "1", clock)
        else:
            seen_missing = True
            assert choices == ("image_unavailable", "prefer_not_to_answer")
            assert "Image unavailable" in app.body.children[2].value
            _key(app, "1", clock)
    assert seen_ok and seen_missing
    img = [a for a in st.latest_annotations() if a["phase"] == "image"]
    assert {a["image_support"] for a in img} <= {"yes", "image_unavailable"}
    ok = [a for a in img if a["image_support"] == "yes"]
    assert ok and all(a["confidence"] == 4 and a["note"] == "sign partly hidden" for a in ok)
    # pair phase: two 5-point scales, or "image unavailable" for a missing image
    while app.task is not None:
        if app.order == ["image_unavailable"]:
            _key(app, "1", clock)
        else:
            _key(app, "3", clock)
            _key(app, "4", clock)
    assert "All done" in app.body.children[-1].value
    pair = [a for a in st.latest_annotations() if a["phase"] == "pair"]
    assert {(a["salient_coverage"], a["control_usefulness"]) for a in pair if not a["image_unavailable"]} == {(3, 4)}


def test_annotation_app_never_raises(tmp_path: Path) -> None:
    box = annotation_app(study=tmp_path / "missing.sqlite")
    assert "cannot be opened" in box.children[1].value
    k = KeyCapture()
    assert "_model_module" in k.get_state() and "capture_keys" in k.get_state()


def test_closed_study_is_announced(app_env) -> None:
    st, code, app, clock = app_env
    st.close_study()
    _login(app, code)
    assert "not open for annotation" in app.body.children[0].value and app.task is None
