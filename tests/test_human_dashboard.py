"""The study lead's dashboard: numbers checked by hand on a small study, read-only access, and the
served notebook in headless Chromium at 1280×800 (screenshot under outputs/demo/human/)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from capaudit.errors import InputError
from capaudit.human.dashboard import render_dashboard, study_dashboard
from capaudit.human.serve import DASHBOARD_NOTEBOOK, prepare_notebook
from capaudit.human.simulate import fixture_study, run_simulated_session
from capaudit.human.study import Study

from _browser import CHROMIUM, FLAGS, playwright_or_skip, voila_server

REPO = Path(__file__).resolve().parents[1]
CAPTION = {"caption_licensed": "yes", "atomic_visual_claim": "yes", "category_check": "correct"}


@pytest.fixture()
def two_raters(tmp_path: Path):
    st, people, _ = fixture_study(tmp_path, n_images=6, humans=2, labels_per_item=2, claims_per_stratum=1,
                                  repeat_fraction=0.0)
    a, b = (st.login(p.code) for p in people)
    for s in (a, b):
        s.give_consent()
    items = [t.item_id for t in a.tasks() if t.phase == "caption"][:4]
    assert {t.item_id for t in b.tasks() if t.phase == "caption"} >= set(items)
    labels_a, labels_b = ("yes", "yes", "no", "no"), ("yes", "no", "no", "no")
    for i, (x, y) in enumerate(zip(labels_a, labels_b)):
        for s, lab, ms in ((a, x, 2000 + 1000 * i), (b, y, 4000)):
            s.record(items[i], "caption", CAPTION, elapsed_ms=1000)
            s.record(items[i], "image", {"image_support": lab}, elapsed_ms=ms)
    yield st, items, people
    st.close()


def test_agreement_progress_and_queue_by_hand(two_raters) -> None:
    st, items, people = two_raters
    ro = Study.load(st.path, read_only=True)
    d = study_dashboard(ro)
    img = next(r for r in d.agreement if r.field == "image_support" and r.category == "all")
    # a: yes yes no no / b: yes no no no -> 3 of 4 agree; positive 2·1/(2·1+1) ; negative 2·2/(2·2+1)
    assert img.n_items == 4 and img.exact == pytest.approx(0.75)
    assert img.positive == pytest.approx(2 / 3) and img.negative == pytest.approx(0.8)
    assert img.kappa_kind == "Cohen" and img.kappa == pytest.approx(0.5)  # (0.75 - 0.5) / (1 - 0.5)
    lic = next(r for r in d.agreement if r.field == "caption_licensed" and r.category == "all")
    assert lic.exact == 1.0 and lic.negative is None  # no "no" label: negative agreement undefined, not 0
    per_type = [r for r in d.agreement if r.field == "image_support" and r.category != "all"]
    assert sum(r.n_items for r in per_type) == 4
    rows = {r.pseudonym: r for r in d.annotators}
    p1, p2 = rows[people[0].pseudonym], rows[people[1].pseudonym]
    assert p1.by_phase["caption"][0] == 4 and p1.by_phase["image"][0] == 4 and p1.by_phase["pair"][0] == 0
    assert p1.by_phase["caption"][1] == len([t for t in st.login(people[0].code).tasks() if t.phase == "caption"])
    assert p1.median_s_per_judgment == pytest.approx(1.5)  # 1,1,1,1,2,3,4,5 s
    assert p1.median_s_per_item is None and p1.items_in_progress == 4  # no item has all three phases yet
    assert p2.median_s_per_judgment == pytest.approx(2.5)
    a = st.login(people[0].code)
    for i in (0, 1):
        a.record(items[i], "pair", {"salient_coverage": 3, "control_usefulness": 3}, elapsed_ms=1000)
    p1 = next(r for r in study_dashboard(ro).annotators if r.pseudonym == people[0].pseudonym)
    assert p1.median_s_per_item == pytest.approx(4.5) and p1.items_in_progress == 2  # items of 1+2+1 and 1+3+1 s
    assert [(q.item_id, q.field, q.labels) for q in d.queue] == [(items[1], "image_support", ("no", "yes"))]
    assert d.queue[0].claim  # the claim as annotators read it
    assert all(r.n == 0 and r.exact is None for r in d.repeats)
    html = render_dashboard(d)
    assert "n/a" in html and "SIMULATED" not in html and "Adjudication queue (1)" in html
    ro.close()
    st.adjudicate(items[1], "image_support", "no", "LEAD")
    ro = Study.load(st.path, read_only=True)
    assert study_dashboard(ro).queue == []
    ro.close()


def _contents(st: Study) -> list:
    return [tuple(r) for t in ("studies", "annotations", "annotation_events", "adjudications", "participants")
            for r in st.store.read(f"SELECT * FROM {t} ORDER BY rowid")]


def test_dashboard_opens_read_only(two_raters) -> None:
    st, _, _ = two_raters
    before = _contents(st)
    ro = Study.load(st.path, read_only=True)
    with pytest.raises(InputError, match="read-only"):
        ro.store.write(lambda c: c.execute("UPDATE studies SET status = 'closed'"))
    with pytest.raises(sqlite3.OperationalError, match="readonly|read-only"):
        ro.store.conn.execute("UPDATE studies SET status = 'closed'")
    study_dashboard(ro)
    ro.close()
    assert st.status == "open" and _contents(st) == before
    with pytest.raises(InputError, match="no study database"):
        Study.load(st.path.with_name("absent.sqlite"), read_only=True)


def test_simulated_study_with_repeats_is_labelled(tmp_path: Path) -> None:
    st, _, sims = fixture_study(tmp_path, n_images=6, humans=0, simulated=2, labels_per_item=2, claims_per_stratum=1,
                                repeat_fraction=0.5, mode="simulated")
    for s in sims:
        run_simulated_session(st.login(s.code), seed=3)
    d = study_dashboard(st)
    assert d.mode == "simulated" and d.n_repeats > 0
    img = next(r for r in d.repeats if r.field == "image_support")
    assert img.n == d.n_repeats and img.exact is not None and 0 <= img.exact <= 1
    assert "SIMULATED study" in render_dashboard(d)
    st.close()


@pytest.mark.slow
def test_served_dashboard_at_1280x800(tmp_path: Path) -> None:
    sync_api = playwright_or_skip()
    st, _, sims = fixture_study(tmp_path, n_images=10, humans=0, simulated=3, labels_per_item=2, claims_per_stratum=1,
                                repeat_fraction=0.3, mode="simulated", claims="extractor")
    for s in sims:
        run_simulated_session(st.login(s.code), seed=5, accuracy=0.8)
    ipynb = prepare_notebook(st.path, tmp_path / "dash", notebook=DASHBOARD_NOTEBOOK)
    shots = REPO / "outputs" / "demo" / "human" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with voila_server(ipynb, tmp_path, tmp_path / "voila.log") as (_, url), sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url, timeout=90_000)
            page.wait_for_selector(".capaudit-dashboard", timeout=90_000)
            for sel in (".capaudit-dash-annotators", ".capaudit-dash-agreement", ".capaudit-dash-repeats",
                        ".capaudit-dash-queue", ".capaudit-simulated"):
                assert page.locator(sel).is_visible(), sel
            assert page.locator(".capaudit-dash-annotators tbody tr").count() == 3
            page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
            browser.close()
        assert (shots / "dashboard.png").stat().st_size > 10_000
    finally:
        st.close()
