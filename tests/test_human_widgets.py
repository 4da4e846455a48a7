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
    assert app.status.value.endswith("Please check it and try again.</span>") and app.session is None
    assert "invite_code" not in app.status.value and "field" not in app.status.value
    app._on_msg(app.keys, {"kind": "code", "value": "ALSO-WRONG", "screen": app.keys.screen}, [])  # Enter
    assert "not valid" in app.status.value and app.code.value == "ALSO-WRONG"
    _login(app, code)
    assert app.task is not None and app.task.phase == "caption" and app.task.position == 0


def test_keyboard_and_mouse_record_one_judgment_each(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    assert app.keys.capture_keys[:3] == ["1", "2", "3"] and "Backspace" in app.keys.capture_keys
    first = app.task
    for k in "111":  # yes, yes, correct: answered, not saved; the optional confidence is next
        _key(app, k, clock)
    assert _count(st) == 0 and app.task is first and app.questions[app.cursor] == "confidence"
    assert not app.next_btn.disabled and "Enter" in app.item_state.value
    _key(app, "4", clock)  # confidence 4
    _key(app, "Enter", clock)
    assert _count(st) == 1 and app.task.position == 1
    saved = app.session.saved(first.item_id, "caption")
    assert saved.values["caption_licensed"] == "yes" and saved.values["category_check"] == "correct"
    assert saved.values["confidence"] == 4
    assert saved.elapsed_ms == 5000  # five ticks of the fake clock
    # mouse: incorrect category asks for the corrected one; Next stays off until it is answered
    clock.tick()
    app.option_buttons["caption_licensed"][1].click()
    clock.tick()
    app.option_buttons["atomic_visual_claim"][0].click()
    clock.tick()
    app.option_buttons["category_check"][1].click()
    assert app.order[-1] == "corrected_category" and app.next_btn.disabled
    clock.tick()
    app.next_btn.click()  # disabled in the browser; a stray click is refused in words
    assert _count(st) == 1 and "answer every question" in app.status.value
    clock.tick()
    app.option_buttons["corrected_category"][0].click()
    clock.tick()
    app.next_btn.click()
    assert _count(st) == 2 and app.task.position == 2
    assert "Saved" in app.status.value and "revision" not in app.status.value


def test_double_click_records_one_judgment(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    for name in ("caption_licensed", "atomic_visual_claim", "category_check"):
        clock.tick()
        app.option_buttons[name][0].click()
    clock.tick()
    button = app.next_btn
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
    for k in "111\r":
        _key(app, "Enter" if k == "\r" else k, clock)
    assert app._prev_index() == 0
    _key(app, "Backspace", clock)
    assert app.task.position == 0 and app.saved is not None and "saved" in app.item_state.value
    assert app.option_buttons["caption_licensed"][0].button_style == "primary"
    _key(app, "Enter", clock)  # keep: no new revision
    assert app.task.position == 1 and _count(st) == 1
    _key(app, "ArrowLeft", clock)
    _key(app, "ArrowUp", clock)
    _key(app, "ArrowUp", clock)
    _key(app, "ArrowUp", clock)  # to the first question
    _key(app, "2", clock)  # change the first answer, then save
    _key(app, "Enter", clock)
    assert _count(st) == 2 and app.session.saved(app.tasks[0].item_id, "caption").revision == 2
    assert app.task.position == 1
    _key(app, "Backspace", clock)
    _key(app, "Backspace", clock)  # first item of the phase: nothing before it
    assert app.task.position == 0


def test_resume_after_restart_at_first_unanswered(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    for _ in range(3):
        for k in ("1", "1", "1", "Enter"):
            _key(app, k, clock)
    fresh = AnnotationApp(st, clock=clock)  # a kernel restart / reload / second browser
    fresh.code.value = code
    fresh.start.click()
    assert fresh.task.phase == "caption" and fresh.task.position == 3  # no consent screen the second time
    assert fresh.session.progress().done == 3


def _answer_caption_batch(app: AnnotationApp, clock: Clock) -> None:
    while app.task is not None and app.task.phase == "caption":
        for k in ("1", "1", "1", "Enter"):
            _key(app, k, clock)


def test_phases_run_in_batches_with_blinding_per_item(tmp_path: Path) -> None:
    st, people, _ = fixture_study(tmp_path, n_images=16, humans=1, labels_per_item=1, claims_per_stratum=2,
                                  batch_size=4)
    clock = Clock()
    app = AnnotationApp(st, clock=clock)
    _login(app, people[0].code)
    tasks = app.tasks
    n_items = sum(t.phase == "caption" for t in tasks)
    assert n_items > 8
    # batch k: its 4 caption steps, then the same items' image steps, then their pair steps
    first = tasks[:12]
    assert [t.phase for t in first] == ["caption"] * 4 + ["image"] * 4 + ["pair"] * 4
    assert {t.item_id for t in first[:4]} == {t.item_id for t in first[4:8]} == {t.item_id for t in first[8:]}
    assert {t.batch for t in first} == {0} and tasks[12].batch == 1 and tasks[12].phase == "caption"
    assert [t.in_batch for t in first[4:8]] == [0, 1, 2, 3] and first[4].batch_items == 4
    assert "Batch 1 of" in app.where.value and "Caption step · item 1 of 4" in app.where.value
    _answer_caption_batch(app, clock)
    assert app.task.phase == "image" and app.task.batch == 0
    assert "Now the image step of batch 1" in app.status.value
    assert app.session.progress().by_batch[0] == (4, 12)
    assert "4 of 12 answers in this batch" in app.where.value
    st.close()


def test_image_phase_missing_image_and_optional_fields(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    seen_missing = seen_ok = False
    while app.task is not None and not (seen_missing and seen_ok and app.task.phase == "caption"):
        if app.task.phase == "caption":
            _answer_caption_batch(app, clock)
            continue
        if app.task.phase == "pair":  # two 5-point scales, or "image unavailable" for a missing image
            keys = ("1",) if app.order == ["image_unavailable"] else ("3", "4", "Enter")
            for k in keys:
                _key(app, k, clock)
            continue
        choices = app._choices("image_support")
        if app.image_ok:
            seen_ok = True
            assert len(choices) == 5 and "image_unavailable" not in choices  # offered only when it failed
            left = app.body.children[0].children[0].children[0]
            assert isinstance(left, W.Image)
            before = _count_phase(st, "image")
            _key(app, "1", clock)  # yes: not saved yet, optional fields still reachable
            assert app.questions[app.cursor] == "confidence" and _count_phase(st, "image") == before
            _key(app, "4", clock)
            app.tag_buttons["occluded"].value = True
            app.note.value = "contact me at x@y.org"
            _key(app, "Enter", clock)
            assert "e-mail address" in app.status.value and "note" not in app.status.value.split("Your note")[0]
            assert app.note.value == "contact me at x@y.org" and app.draft["confidence"] == "4"
            app.note.value = "sign partly hidden"
            _key(app, "Enter", clock)
        else:
            seen_missing = True
            assert choices == ("image_unavailable", "prefer_not_to_answer")
            assert "could not be loaded" in app.body.children[0].children[0].children[0].value
            _key(app, "1", clock)
            _key(app, "Enter", clock)
    assert seen_ok and seen_missing
    img = [a for a in st.latest_annotations() if a["phase"] == "image"]
    assert {a["image_support"] for a in img} <= {"yes", "image_unavailable"}
    ok = [a for a in img if a["image_support"] == "yes"]
    assert ok and all(a["confidence"] == 4 and a["note"] == "sign partly hidden" and a["reason_tags"] == '["occluded"]'
                      for a in ok)
    pair = [a for a in st.latest_annotations() if a["phase"] == "pair"]
    assert pair and {(a["salient_coverage"], a["control_usefulness"]) for a in pair if not a["image_unavailable"]} == {(3, 4)}
    scale = [b.description for b in app.option_buttons.get("caption_licensed", [])]
    assert scale  # back in the caption step of the next batch


def _count_phase(st, phase: str) -> int:
    return st.store.one("SELECT COUNT(*) AS k FROM annotations WHERE phase = ?", (phase,))["k"]


def test_pair_step_is_about_the_whole_caption(tmp_path: Path) -> None:
    st, people, _ = fixture_study(tmp_path, n_images=16, humans=1, labels_per_item=1, claims_per_stratum=2)
    clock = Clock()
    app = AnnotationApp(st, clock=clock)  # no missing image: every pair step shows its image
    _login(app, people[0].code)
    _answer_caption_batch(app, clock)
    while app.task.phase == "image":
        _key(app, "1", clock)
        _key(app, "Enter", clock)
    assert app.task.phase == "pair" and app.image_ok
    texts = " ".join(getattr(w, "value", "") for w in app.body.children[0].children[1].children)
    assert "Claim:" not in texts and "Caption:" in texts
    assert [b.description for b in app.option_buttons["salient_coverage"]] == ["1", "2", "3", "4", "5"]
    row = app.field_boxes["salient_coverage"].children[1].children
    assert "1 = covers little" in row[0].value and "5 = covers all" in row[-1].value
    st.close()


def test_typed_note_survives_a_new_question_and_enter_in_the_note_saves(app_env) -> None:
    st, code, app, clock = app_env
    _login(app, code)
    first = app.task
    _key(app, "1", clock)
    _key(app, "1", clock)
    app.note.value = "the claim type looks off"
    _key(app, "2", clock)  # category incorrect: a question appears, the screen is rebuilt
    assert app.order[-1] == "corrected_category" and app.note.value == "the claim type looks off"
    _key(app, "1", clock)  # corrected category
    clock.tick()
    app._on_msg(app.keys, {"kind": "note", "value": "the claim type looks off!", "screen": app.keys.screen}, [])
    saved = app.session.saved(first.item_id, "caption")
    assert saved is not None and saved.values["note"] == "the claim type looks off!"
    assert app.task is not first and app.task.position == 1


def test_annotation_app_never_raises(tmp_path: Path) -> None:
    box = annotation_app(study=tmp_path / "missing.sqlite")
    assert "cannot be opened" in box.children[1].value and "missing.sqlite" not in box.children[1].value
    k = KeyCapture()
    assert "_model_module" in k.get_state() and "capture_keys" in k.get_state()


def test_closed_study_is_announced(app_env) -> None:
    st, code, app, clock = app_env
    st.close_study()
    _login(app, code)
    assert "not open for answers" in app.body.children[0].value and app.task is None


def test_keyboard_only_start_instructions_and_no_empty_boxes(app_env) -> None:
    st, code, app, clock = app_env
    assert app.keys.hint == "" and app.keys.capture_keys == []  # login: no key pad box (CSS :empty hides it)
    app._on_msg(app.keys, {"kind": "code", "value": code, "screen": app.keys.screen}, [])  # Enter in the field
    assert app.keys.capture_keys == ["Enter"] and "How to judge" in app.body.children[1].value
    _key(app, "Enter", clock)  # consent by keyboard
    assert app.task is not None and app.task.phase == "caption"
    assert app.help_panel.layout.display == "none"
    app.help_btn.value = True
    assert app.help_panel.layout.display == "" and "Claim types" in app.help_panel.value
    right = app.body.children[0].children[1].children
    texts = [getattr(w, "value", None) for w in right if isinstance(w, W.HTML)]
    assert all(t and t.strip() for t in texts)  # no empty boxes
    assert any("e.g." in t and app.view.category.replace("_", " ") in t for t in texts)  # the type's definition
