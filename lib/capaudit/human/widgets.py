"""The annotation notebook front end (ipywidgets + one small anywidget for the keyboard).

One screen per item, sized for a 1280×800 window: the caption or the image on the left, the claim,
its questions, the optional confidence / reasons / note and the navigation on the right. The caption
step shows the caption window with the claim highlighted by its span offsets (no image); the image
step shows the image scaled to fit and the claim (no caption); the whole-pair step shows the whole
caption and the image, rated on two 5-point scales. Definitions of "atomic", "visual" and the
claim's type, each with an example, sit beside the questions; the instructions panel opens from the
header (text: ``human/data/guidance.yaml``).

Keys (captured by :class:`KeyCapture`): ``1``–``9`` answer the current question (the required ones,
then the optional confidence), ``↑``/``↓`` move between questions, ``Enter``/``→`` save and go on
(also ``Enter`` in the note field),
``Backspace``/``←`` go back one item. Answering does not save: the optional fields stay reachable,
and Enter (or "Save and next") commits the judgment through :meth:`AnnotatorSession.record`. The
key pad and the whole annotator carry ``data-lm-suppress-shortcuts`` — set on the annotator and, on
``focusin``, on every element that takes focus inside it, because Lumino matches a shortcut's
selector on the focused element before walking to its ancestors — so JupyterLab's notebook shortcuts
stay off while the annotator has focus; handled keys also stop propagating.

After a kernel restart, page reload or in a second browser the participant logs in again with the
invite code (Enter in the field starts) and the UI resumes at the first unanswered item, rebuilt from
the store. The "image unavailable" answer is offered only when the image did not load. A double
click records one judgment (events carry the screen they were made on, and events within
``debounce_s`` of a new screen are ignored). Errors are shown in the annotator's words, never raised.
"""

from __future__ import annotations

import html
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import anywidget
import ipywidgets as W
import traitlets

from capaudit.errors import InputError

from .guidance import load_guidance
from .render import claim_html, highlight_caption, load_image
from .protocol import CATEGORIES, LABELS, PHASE_FIELDS, REASON_TAGS, SCALE_FIELDS, UNAVAILABLE_IMAGE_CHOICES, option_label
from .study import AnnotatorSession, ItemView, Saved, StaleJudgmentError, Study, Task

PathLike = Union[str, Path]
log = logging.getLogger(__name__)

PHASE_TITLES = {"caption": "Caption step", "image": "Image step", "pair": "Whole-pair step"}
CONFIDENCE = "confidence"
#: image_support answers offered when the image loaded ("image unavailable" only when it did not)
IMAGE_LOADED_CHOICES: Tuple[str, ...] = tuple(v for v in PHASE_FIELDS["image"]["image_support"]
                                              if v != "image_unavailable")

_KEYS_JS = r"""
function render({ model, el }) {
  const pad = document.createElement("div");
  pad.className = "capaudit-keys";
  pad.tabIndex = 0;
  pad.setAttribute("data-lm-suppress-shortcuts", "true");
  pad.setAttribute("role", "group");
  pad.setAttribute("aria-label", "keyboard shortcuts");
  const showHint = () => { pad.textContent = model.get("hint"); };
  showHint();
  el.appendChild(pad);
  let host = null;
  let tries = 0;
  const mark = (n) => { if (n && n.setAttribute) n.setAttribute("data-lm-suppress-shortcuts", "true"); };
  const onFocus = (e) => mark(e.target);
  function onCode(e) {
    // Enter in the invite-code or note field (capture phase: the text widget stops the key's
    // propagation); the field's own value is sent, as a state sync queued behind the widget
    // throttle may lag it
    const t = e.target;
    if (e.key !== "Enter" || !(t && t.closest)) return;
    const kind = t.closest(".capaudit-code") ? "code" : t.closest(".capaudit-note") ? "note" : null;
    if (!kind) return;
    e.preventDefault();
    if (e.repeat) return;
    model.send({ kind: kind, value: t.value || "", screen: model.get("screen") });
  }
  function onKey(e) {
    const t = e.target;
    if (t && t.closest && t.closest("input, textarea, select, [contenteditable='true']")) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (!model.get("capture_keys").includes(e.key)) return;
    e.preventDefault();
    e.stopPropagation();
    if (e.repeat) return;
    model.send({ kind: "key", key: e.key, screen: model.get("screen") });
  }
  function attach() {
    if (!el.isConnected && tries++ < 200) { setTimeout(attach, 25); return; }
    host = el.closest(".capaudit-annotator") || pad;
    host.setAttribute("data-lm-suppress-shortcuts", "true");
    host.addEventListener("keydown", onKey);
    host.addEventListener("keydown", onCode, true);
    // Lumino matches a shortcut's selector on the focused element before it looks at its
    // ancestors, so the attribute must sit on whatever takes focus (buttons, inputs) too.
    host.addEventListener("focusin", onFocus);
    host.querySelectorAll("button, input, textarea, select, [tabindex]").forEach(mark);
    pad.focus({ preventScroll: true });
  }
  attach();
  model.on("change:hint", showHint);
  model.on("change:focus_token", () => {
    const a = document.activeElement;
    if (!(a && a.closest && a.closest("input, textarea"))) pad.focus({ preventScroll: true });
  });
  return () => {
    if (host) {
      host.removeEventListener("keydown", onKey);
      host.removeEventListener("keydown", onCode, true);
      host.removeEventListener("focusin", onFocus);
    }
  };
}
export default { render };
"""

_CSS = """
.capaudit-annotator { width: 100%; max-width: 1260px; font-size: 14px; box-sizing: border-box; position: relative; }
.capaudit-annotator .capaudit-instructions { position: absolute; top: 50px; left: 0; right: 0; z-index: 20;
  background: #fff; border: 1px solid #999; border-radius: 6px; box-shadow: 0 4px 16px rgba(0,0,0,.25);
  padding: 4px 14px; max-height: calc(100vh - 70px); overflow: auto; }
.capaudit-annotator h2 { font-size: 18px; margin: 0; }
.capaudit-annotator p { margin: 2px 0; }
.capaudit-annotator .widget-html, .capaudit-annotator .widget-html-content { line-height: 1.35; height: auto; }
.capaudit-annotator .capaudit-header { align-items: center; gap: 12px; border-bottom: 1px solid #ddd;
  padding-bottom: 4px; margin-bottom: 6px; }
.capaudit-annotator .capaudit-left { flex: 1 1 54%; min-width: 0; padding-right: 14px; }
.capaudit-annotator .capaudit-right { flex: 1 1 46%; min-width: 0; }
.capaudit-annotator .capaudit-caption { font-size: 16px; line-height: 1.5; padding: 8px 12px;
  border: 1px solid #ccc; border-radius: 6px; background: #fafafa; }
.capaudit-annotator mark.capaudit-claim { background: #ffe066; padding: 0 2px; border-radius: 3px; }
.capaudit-annotator .capaudit-claimbox { font-size: 16px; padding: 2px 0; }
.capaudit-annotator .capaudit-help { font-size: 12px; color: #555; line-height: 1.35; }
.capaudit-annotator .capaudit-q { padding: 1px 0 1px 8px; margin: 2px 0; border-left: 4px solid transparent; }
.capaudit-annotator .capaudit-current { border-left-color: #1976d2; background: #f3f8fd; }
.capaudit-annotator .capaudit-anchor { font-size: 12px; color: #555; align-self: center; padding: 0 6px; }
.capaudit-annotator .capaudit-saved { color: #1b5e20; font-weight: bold; }
.capaudit-annotator .capaudit-error { color: #b71c1c; font-weight: bold; }
.capaudit-annotator .capaudit-rehearsal { background: #fff3cd; border: 2px solid #b26a00; padding: 4px 8px; margin: 2px 0; }
.capaudit-annotator .capaudit-unavailable { padding: 40px; border: 2px dashed #b71c1c; color: #b71c1c;
  font-size: 18px; text-align: center; }
.capaudit-annotator .capaudit-image img, .capaudit-annotator img.capaudit-image { max-width: 100%;
  max-height: calc(100vh - 150px); object-fit: contain; }
.capaudit-keys { font-size: 12px; color: #555; padding: 2px 8px; border: 1px dashed #bbb; border-radius: 4px;
  outline: none; margin-top: 4px; }
.capaudit-keys:empty { display: none; }
.capaudit-keys:focus { border-color: #1976d2; color: #1976d2; }
.capaudit-annotator .widget-html:empty, .capaudit-annotator .widget-html-content:empty { display: none; }
"""


class KeyCapture(anywidget.AnyWidget):
    """A focusable element that sends ``{"kind": "key", "key", "screen"}`` messages for ``capture_keys``."""

    _esm = _KEYS_JS
    _css = _CSS
    screen = traitlets.Unicode("").tag(sync=True)
    capture_keys = traitlets.List(traitlets.Unicode(), default_value=[]).tag(sync=True)
    hint = traitlets.Unicode("").tag(sync=True)
    focus_token = traitlets.Int(0).tag(sync=True)


def annotator_message(exc: InputError) -> str:
    """A refusal in the annotator's words (the field's message of the guidance; never a field name)."""
    return load_guidance().message(exc.field, getattr(exc, "message", ""))


def _e(text: str) -> str:
    return html.escape(text)


class AnnotationApp:
    """The annotator UI for one study; :attr:`root` is the widget to display."""

    def __init__(self, study: Study, *, invite_code: Optional[str] = None,
                 clock: Callable[[], float] = time.monotonic, debounce_s: float = 0.35):
        self.study = study
        self.guide = load_guidance()
        self.clock = clock
        self.debounce_s = debounce_s
        self.session: Optional[AnnotatorSession] = None
        self.keys = KeyCapture(hint="")
        self.keys.on_msg(self._on_msg)
        self.rehearsal = study.rehearsal_of is not None
        self.title = W.HTML(self._title())
        self.where = W.HTML("")
        self.bar = W.IntProgress(value=0, min=0, max=1, layout=W.Layout(width="220px", display="none"))
        self.help_btn = W.ToggleButton(value=False, description="Instructions", icon="question-circle",
                                       layout=W.Layout(width="130px", height="30px"))
        self.help_btn.add_class("capaudit-help-toggle")
        self.help_btn.observe(self._toggle_help, "value")
        self.help_panel = W.HTML(self._instructions_html(), layout=W.Layout(display="none"))
        self.help_panel.add_class("capaudit-instructions")
        header = W.HBox([self.title, self.where, self.bar, self.help_btn])
        header.add_class("capaudit-header")
        self.status = W.HTML("")
        self.body = W.VBox([])
        banner = W.HTML('<div class="capaudit-rehearsal"><b>REHEARSAL (participant test)</b>: your answers are stored '
                        "apart and discarded; they never count in the study.</div>" if self.rehearsal else "")
        self.root = W.VBox([header, banner, self.help_panel, self.body, self.status, self.keys])
        self.root.add_class("capaudit-annotator")
        self.screen_token = ""
        self.shown_at = 0.0
        self.item_shown_at = 0.0
        self.tasks: List[Task] = []
        self.task: Optional[Task] = None
        self.view: Optional[ItemView] = None
        self.saved: Optional[Saved] = None
        self.draft: Dict[str, Any] = {}
        self.order: List[str] = []
        self.cursor = 0
        self.image_ok = True
        self.option_buttons: Dict[str, List[W.Button]] = {}
        self.field_boxes: Dict[str, W.Widget] = {}
        self.ignored = 0
        self._show_login()
        if invite_code:
            self.login(invite_code)

    def _title(self, pseudonym: str = "") -> str:
        who = f" · {_e(pseudonym)}" if pseudonym else ""
        return f"<h2>Claim verification{who}{' · REHEARSAL' if self.rehearsal else ''}</h2>"

    # -- guidance --------------------------------------------------------------------------------------
    def _instructions_html(self) -> str:
        g = self.guide
        items = "".join(f"<li>{_e(x)}</li>" for x in g.instructions)
        terms = "".join(
            f"<li><b>{_e(t.name)}</b>: {_e(t.definition)} <i>Example:</i> “{_e(t.example_claim)}” in "
            f"“{_e(t.example_caption)}”. {_e(t.example_note)}</li>" for t in g.terms.values())
        cats = "".join(
            f"<li><b>{_e(c.replace('_', ' '))}</b>: {_e(t.definition)} <i>Example:</i> “{_e(t.example_claim)}” "
            f"in “{_e(t.example_caption)}”.</li>" for c, t in g.categories.items())
        return (f'<div class="capaudit-help"><b>How to judge</b><ul>{items}</ul><b>Words we use</b><ul>{terms}</ul>'
                f"<b>Claim types</b><ul>{cats}</ul></div>")

    def _toggle_help(self, change: Dict[str, Any]) -> None:
        self.help_panel.layout.display = "" if change["new"] else "none"

    def _type_help(self, category: str) -> str:
        t = self.guide.categories.get(category)
        if t is None:
            return ""
        return (f'<div class="capaudit-help"><b>{_e(category.replace("_", " "))}</b>: {_e(t.definition)} '
                f"e.g. “{_e(t.example_claim)}” in “{_e(t.example_caption)}”.</div>")

    def _terms_help(self) -> str:
        a, v = self.guide.terms["atomic"], self.guide.terms["visual"]
        return (f'<div class="capaudit-help"><b>atomic</b>: {_e(a.definition)} e.g. “{_e(a.example_claim)}”. '
                f"<b>visual</b>: {_e(v.definition)}</div>")

    # -- screens -----------------------------------------------------------------------------------------
    def _begin_screen(self) -> str:
        """A new screen: events made on earlier screens are ignored from now on."""
        self.screen_token = uuid.uuid4().hex
        self.shown_at = self.clock()
        return self.screen_token

    def _publish_keys(self, keys: Sequence[str], hint: str) -> None:
        self.keys.screen = self.screen_token
        self.keys.capture_keys = list(keys)
        self.keys.hint = hint
        self.keys.focus_token += 1

    def _error(self, msg: str) -> None:
        self.status.value = f'<span class="capaudit-error">{_e(msg)}</span>'

    def _refused(self, exc: InputError) -> None:
        self._error(annotator_message(exc))

    def _set_where(self, text: str, done: int = 0, total: int = 0) -> None:
        self.where.value = f'<span class="capaudit-progress">{_e(text)}</span>' if text else ""
        self.bar.layout.display = "" if total else "none"
        if total:
            self.bar.max = total
            self.bar.value = done

    def _show_login(self, message: str = "", typed: str = "") -> None:
        self._begin_screen()
        self._set_where("")
        self.code = W.Text(value=typed, placeholder="e.g. ABCD-EFGH-JKLM-NPQR", description="Invite code:",
                           layout=W.Layout(width="420px"), continuous_update=True)
        self.code.add_class("capaudit-code")  # Enter in the field: a "code" message of the key pad
        self.start = W.Button(description="Start", button_style="primary", layout=W.Layout(width="160px", height="36px"))
        self.start.add_class("capaudit-start")
        self.start.on_click(self._nav_handler("login"))
        self.body.children = [W.HTML("<p>Enter the invite code you were given, then press Enter or Start. Your "
                                     "answers are saved item by item; you can close the page and come back with the "
                                     "same code.</p>"), W.HBox([self.code, self.start])]
        self._publish_keys([], "")
        self.status.value = ""
        if message:
            self._error(message)

    def login(self, invite_code: str) -> bool:
        """Log in with an invite code; shows consent or the first unanswered item."""
        try:
            self.session = self.study.login(invite_code)
        except InputError as exc:
            msg = ("Please enter your invite code." if not (invite_code or "").strip() else annotator_message(exc))
            self._show_login(msg, typed=invite_code or "")
            return False
        self.title.value = self._title(self.session.pseudonym)
        self.status.value = ""
        if self.session.needs_consent():
            self._show_consent()
        else:
            self.resume()
        return True

    def _show_consent(self) -> None:
        self._begin_screen()
        agree = W.Button(description="I agree — start", button_style="success", layout=W.Layout(width="220px", height="40px"))
        agree.add_class("capaudit-consent")
        agree.on_click(self._nav_handler("consent"))
        self.body.children = [W.HTML(
            "<h3>Before you start</h3><p>You will judge short claims about images. We store your answers under a "
            "pseudonym only: no name, e-mail address, IP address or browser details. Please do not write personal "
            "or contact information in notes. You can stop at any time; answers given so far are kept.</p>"),
            W.HTML(self._instructions_html()), agree]
        self._publish_keys(["Enter"], "Enter: I agree — start")

    def _consent(self) -> None:
        assert self.session is not None
        self.session.give_consent()
        self.resume()

    def resume(self) -> None:
        """Rebuild from the store and go to the first unanswered item (or the end screen)."""
        assert self.session is not None
        self.tasks = self.session.tasks(refresh=True)
        if self.study.status != "open":
            self._begin_screen()
            self.task = None
            self._set_where("")
            self.body.children = [W.HTML("<h3>The study is not open for answers right now.</h3>"
                                         "<p>Please come back later; your saved answers are kept.</p>")]
            self._publish_keys([], "")
            return
        i = self.session.first_unanswered()
        if i is None:
            self._show_done()
        else:
            self.show(i)

    def _show_done(self) -> None:
        assert self.session is not None
        p = self.session.progress()
        self._begin_screen()
        self.task = None
        self._set_where(f"{p.done} of {p.assigned} answers saved", p.done, p.assigned)
        self.body.children = [W.HTML(f"<h3>All done — thank you!</h3><p>All {p.done} answers are saved. "
                                     "You can close this page.</p>")]
        self._publish_keys([], "")

    def _update_where(self) -> None:
        assert self.session is not None and self.task is not None
        t, p = self.task, self.session.progress()
        done, total = p.by_batch[t.batch] if t.batch < len(p.by_batch) else (p.done, p.assigned)
        parts = [f"Batch {t.batch + 1} of {len(p.by_batch) or 1}", f"{PHASE_TITLES[t.phase]} · item {t.in_batch + 1} "
                 f"of {t.batch_items}", f"{done} of {total} answers in this batch"]
        if p.mean_seconds is not None:
            parts.append(f"{p.mean_seconds:.0f} s per answer")
        self._set_where(" · ".join(parts), done, total)

    def show(self, index: int) -> None:
        """Show task ``index`` of the participant's queue."""
        assert self.session is not None
        self.task = t = self.tasks[index]
        self.view = self.session.view(t.item_id, t.phase)
        self.saved = self.session.saved(t.item_id, t.phase)
        draft = dict(self.saved.values) if self.saved else {}
        self.draft = {k: (str(v) if k in SCALE_FIELDS + (CONFIDENCE,) else v) for k, v in draft.items()
                      if v not in (None, [], 0, "") or k == "image_unavailable"}
        self.image_bytes = load_image(self.view.image_path) if t.phase in ("image", "pair") else None
        self.image_ok = self.image_bytes is not None
        self._set_order()
        self.cursor = self._first_open()
        self.item_shown_at = self.clock()
        self._render()

    def _set_order(self) -> None:
        assert self.task is not None
        ph = self.task.phase
        if ph == "pair" and not self.image_ok:
            self.order = ["image_unavailable"]
            return
        self.order = list(PHASE_FIELDS[ph])
        if ph == "caption" and self.draft.get("category_check") == "incorrect":
            self.order.append("corrected_category")

    @property
    def questions(self) -> List[str]:
        """The keyboard's questions: the required ones, then the optional confidence."""
        return self.order + ([CONFIDENCE] if self.order != ["image_unavailable"] else [])

    def _first_open(self) -> int:
        todo = [i for i, f in enumerate(self.order) if f not in self.draft]
        return todo[0] if todo else len(self.order) - 1 if self.saved else len(self.order)

    def _choices(self, name: str) -> Tuple[str, ...]:
        assert self.task is not None
        if name == "image_unavailable":
            return ("image_unavailable",)
        if name == CONFIDENCE:
            return ("1", "2", "3", "4", "5")
        if name == "corrected_category":
            return tuple(c for c in CATEGORIES if c != self._item_category())
        if self.task.phase == "image" and name == "image_support":
            return IMAGE_LOADED_CHOICES if self.image_ok else UNAVAILABLE_IMAGE_CHOICES
        return PHASE_FIELDS[self.task.phase][name]

    def _item_category(self) -> str:
        assert self.task is not None
        return self.study.item(self.task.item_id)["category"]

    def _shared(self) -> None:
        """Layouts and styles shared by every button (fewer widget models per screen)."""
        if not hasattr(self, "_opt_layout"):
            self._opt_layout = W.Layout(width="auto", min_width="44px", height="32px", margin="1px 2px")
            self._opt_style = W.ButtonStyle(font_size="14px")
            self._row_layout = W.Layout(flex_flow="row wrap", align_items="center")
            self._nav_layout = W.Layout(width="150px", height="36px")
            self._tag_layout = W.Layout(width="auto", height="28px", margin="1px")

    def _question(self, name: str) -> W.Widget:
        """One question: its label and a row of buttons (5-point scales: "1" … "5" between anchors)."""
        choices = self._choices(name)
        btns = []
        scale = name in SCALE_FIELDS or name == CONFIDENCE
        for i, val in enumerate(choices):
            if name == "image_unavailable":
                label = "1  The image did not load — go on"
            elif scale:
                label = val
            else:
                label = f"{i + 1}  {option_label(val).replace('_', ' ')}"
            b = W.Button(description=label, layout=self._opt_layout, style=self._opt_style,
                         tooltip=f"key {i + 1}" if i < 9 else "")
            b.add_class(f"capaudit-opt-{name}")
            b.on_click(self._click_handler(name, val))
            btns.append(b)
        self.option_buttons[name] = btns
        row: List[W.Widget] = list(btns)
        if name in SCALE_FIELDS:
            low, high = self.guide.scales[name]
            row = [self._anchor(f"1 = {low}")] + row + [self._anchor(f"5 = {high}")]
        elif name == CONFIDENCE:
            row = [self._anchor("1 = guessing")] + row + [self._anchor("5 = certain")]
        if name == CONFIDENCE:
            question = "Confidence (optional)"
        else:  # the scales' anchors sit beside their buttons, not in the question
            question = LABELS.get(name, "The image could not be shown.").split(" (1 = ")[0]
        box = W.VBox([W.HTML(f"<b>{_e(question)}</b>"), W.HBox(row, layout=self._row_layout)])
        box.add_class("capaudit-q")
        self.field_boxes[name] = box
        return box

    def _anchor(self, text: str) -> W.HTML:
        return W.HTML(f'<span class="capaudit-anchor">{_e(text)}</span>')

    def _render(self, keep_screen: bool = False) -> None:
        """Build the item screen (``keep_screen``: same item, its events stay valid)."""
        assert self.session is not None and self.task is not None and self.view is not None
        t, v = self.task, self.view
        self._shared()
        if not keep_screen:
            self._begin_screen()
        self._update_where()
        left: List[W.Widget] = []
        right: List[W.Widget] = [W.HTML(f"<p><b>{PHASE_TITLES[t.phase]}.</b> {_e(self.guide.phases[t.phase])}</p>")]
        if t.phase == "caption":
            window = v.caption_window or ""
            left.append(W.HTML(f'<div class="capaudit-caption">{highlight_caption(window, v.span_offsets)}</div>'))
        else:
            if self.image_ok:
                img = W.Image(value=self.image_bytes, format="jpeg",
                              layout=W.Layout(max_width="100%", max_height="calc(100vh - 150px)", width="auto",
                                              height="auto", object_fit="contain"))
                img.add_class("capaudit-image")
                left.append(img)
            else:
                left.append(W.HTML('<div class="capaudit-unavailable">The image could not be loaded.</div>'))
        if t.phase == "pair":
            right.append(W.HTML(f'<div class="capaudit-caption"><b>Caption:</b> {_e(v.caption_window or "")}</div>'))
        else:
            right.append(W.HTML(claim_html(v.claim)))
        if t.phase == "caption" and v.category:
            right.append(W.HTML(f'<div class="capaudit-claimbox">Claim type: <i>{_e(v.category.replace("_", " "))}'
                                f"</i></div>{self._type_help(v.category)}"))
        self.option_buttons = {}
        self.field_boxes = {}
        for name in self.order:
            right.append(self._question(name))
            if name == "atomic_visual_claim":
                right.append(W.HTML(self._terms_help()))
        if self.order != ["image_unavailable"]:
            right.append(self._question(CONFIDENCE))
            right.append(self._optional_widgets(t.phase))
        self.back_btn = W.Button(description="◀ Previous item", layout=self._nav_layout,
                                 disabled=self._prev_index() is None)
        self.back_btn.add_class("capaudit-back")
        self.back_btn.on_click(self._nav_handler("back"))
        self.next_btn = W.Button(description="Save and next ▶", button_style="primary", layout=self._nav_layout)
        self.next_btn.add_class("capaudit-next")
        self.next_btn.on_click(self._nav_handler("next"))
        self.item_state = W.HTML("")
        self.item_state.add_class("capaudit-item-state")
        right.append(W.HBox([self.back_btn, self.next_btn, self.item_state], layout=W.Layout(align_items="center")))
        lbox, rbox = W.VBox(left), W.VBox(right)
        lbox.add_class("capaudit-left")
        rbox.add_class("capaudit-right")
        self.body.children = [W.HBox([lbox, rbox], layout=W.Layout(width="100%", align_items="flex-start"))]
        self._refresh()
        n = max((len(self._choices(f)) for f in self.questions), default=0)
        keys = [str(i) for i in range(1, min(n, 9) + 1)] + ["Backspace", "ArrowLeft", "Enter", "ArrowRight",
                                                            "ArrowUp", "ArrowDown"]
        self._publish_keys(keys, "Keys: 1–9 answer the marked question · ↑/↓ other question · Enter save and next · "
                                 "Backspace previous item")

    def _refresh(self) -> None:
        """Show the current answers, the current question and the save state without rebuilding."""
        qs = self.questions
        current = qs[self.cursor] if self.cursor < len(qs) else None
        for name, btns in self.option_buttons.items():
            for b, val in zip(btns, self._choices(name)):
                chosen = self.draft.get(name) == val or (name == "image_unavailable" and bool(self.draft.get(name)))
                b.button_style = "primary" if chosen else ""
            box = self.field_boxes[name]
            if name == current:
                box.add_class("capaudit-current")
            else:
                box.remove_class("capaudit-current")
        ready = self._ready()
        self.next_btn.disabled = not ready
        if self.saved is not None:
            state = '<span class="capaudit-saved">✓ saved</span> · Enter keeps or saves changes'
        elif ready:
            state = "Press Enter to save"
        else:
            missing = len([f for f in self.order if f not in self.draft])
            state = f"{missing} question{'s' if missing != 1 else ''} left"
        self.item_state.value = state

    def _ready(self) -> bool:
        return self.order == ["image_unavailable"] or all(f in self.draft for f in self.order)

    def _optional_widgets(self, phase: str) -> W.Widget:
        self.tag_buttons = {}
        kids: List[W.Widget] = []
        if phase == "image":
            tags = set(self.draft.get("reason_tags") or [])
            self.tag_buttons = {t: W.ToggleButton(value=t in tags, description=t.replace("_", " "),
                                                  layout=self._tag_layout) for t in REASON_TAGS}
            for b in self.tag_buttons.values():
                b.add_class("capaudit-tag")
            kids.append(W.HBox([self._anchor("Reasons (optional):")] + list(self.tag_buttons.values()),
                               layout=self._row_layout))
        self.note = W.Text(value=self.draft.get("note") or "", placeholder=(
            "Note (optional; no names, e-mail addresses, phone numbers or links)"), layout=W.Layout(width="98%"))
        self.note.add_class("capaudit-note")
        kids.append(self.note)
        box = W.VBox(kids)
        box.add_class("capaudit-optional")
        return box

    # -- events --------------------------------------------------------------------------------------
    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except InputError as exc:
            self._refused(exc)
        except Exception:  # never let a handler crash the UI
            log.exception("annotation UI error")
            self._error("Something went wrong on our side. Your saved answers are safe; please reload the page.")

    def _fresh(self, token: str, debounce: bool = True) -> bool:
        """Is an event made on the screen ``token`` and (``debounce``) not within the debounce window of
        a new screen?"""
        if token != self.screen_token or (debounce and self.clock() - self.shown_at < self.debounce_s):
            self.ignored += 1
            return False
        return True

    def _click_handler(self, name: str, value: str) -> Callable[[W.Button], None]:
        token = self.screen_token

        def handler(_b: W.Button) -> None:
            if self._fresh(token):
                self._guard(lambda: self.choose(name, value))

        return handler

    def _nav_handler(self, action: str) -> Callable[[W.Button], None]:
        token = self.screen_token
        act = {"back": self.back, "next": self.next, "consent": self._consent,
               "login": lambda: self.login(self.code.value)}[action]

        def handler(_b: W.Button) -> None:  # login and consent screens: a double click's second half is stale
            if self._fresh(token, debounce=action not in ("login", "consent")):
                self._guard(act)

        return handler

    def _on_msg(self, _widget: Any, content: Dict[str, Any], _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("kind") == "code" and self.session is None:  # Enter in the invite-code field
            if self._fresh(str(content.get("screen", "")), debounce=False):
                self._guard(lambda: self.login(str(content.get("value", ""))))
            return
        if content.get("kind") == "note" and self.task is not None:  # Enter in the note: save and go on
            if self._fresh(str(content.get("screen", ""))):
                self.note.value = str(content.get("value", ""))
                self._guard(self.next)
            return
        if content.get("kind") != "key" or not self._fresh(str(content.get("screen", ""))):
            return
        self._guard(lambda: self.key(str(content.get("key", ""))))

    def key(self, key: str) -> None:
        """Act on a key of the current screen."""
        if self.task is None:
            if key == "Enter" and self.session is not None and self.session.needs_consent():
                self._consent()
            return
        qs = self.questions
        if key in ("Backspace", "ArrowLeft"):
            self.back()
        elif key in ("Enter", "ArrowRight"):
            self.next()
        elif key in ("ArrowUp", "ArrowDown"):
            step = -1 if key == "ArrowUp" else 1
            self.cursor = max(0, min(len(qs) - 1, self.cursor + step))
            self._refresh()
        elif key.isdigit() and self.cursor < len(qs):
            name = qs[self.cursor]
            choices = self._choices(name)
            i = int(key) - 1
            if 0 <= i < len(choices):
                self.choose(name, choices[i])

    def choose(self, name: str, value: str) -> None:
        """Answer question ``name`` (nothing is saved until Enter / "Save and next")."""
        if self.task is None:
            return
        if name == "image_unavailable":
            self.draft = {"image_unavailable": True}
            self._commit()
            return
        if name == CONFIDENCE and self.draft.get(CONFIDENCE) == value:
            self.draft.pop(CONFIDENCE)  # a second press clears the optional confidence
        else:
            self.draft[name] = value
        before = list(self.order)
        if name == "category_check":
            if value != "incorrect":
                self.draft.pop("corrected_category", None)
            self._set_order()
        qs = self.questions
        i = qs.index(name)
        todo = [k for k, f in enumerate(self.order) if f not in self.draft]
        self.cursor = next((k for k in todo if k > i), todo[0] if todo else len(self.order))
        self.status.value = ""
        if self.order != before:  # a question appeared or went away: keep what was typed or toggled
            self.draft["note"] = self.note.value
            self.draft["reason_tags"] = [t for t, b in self.tag_buttons.items() if b.value]
            self._render(keep_screen=True)
        else:
            self._refresh()

    def _collect(self) -> Dict[str, Any]:
        assert self.task is not None
        if self.task.phase == "pair" and self.draft.get("image_unavailable"):
            return {"image_unavailable": True}
        values: Dict[str, Any] = {}
        for f in self.order:
            values[f] = int(self.draft[f]) if f in SCALE_FIELDS else self.draft[f]
        if self.draft.get(CONFIDENCE):
            values[CONFIDENCE] = int(self.draft[CONFIDENCE])
        tags = [t for t, b in self.tag_buttons.items() if b.value]
        if tags:
            values["reason_tags"] = tags
        if self.note.value.strip():
            values["note"] = self.note.value
        return values

    def _commit(self) -> None:
        assert self.session is not None and self.task is not None
        t = self.task
        values = self._collect()
        elapsed = int(max(0.0, self.clock() - self.item_shown_at) * 1000)
        try:
            res = self.session.record(t.item_id, t.phase, values, expected_revision=self.saved.revision if self.saved else 0,
                                      elapsed_ms=elapsed)
        except StaleJudgmentError as exc:
            self.show(t.index)
            self._refused(exc)
            return
        what = "Kept the saved answer" if res.duplicate else "Saved"
        self.status.value = f'<span class="capaudit-saved">✓ {what}: {PHASE_TITLES[t.phase]}, item {t.in_batch + 1}.</span>'
        self._advance(t)

    def _advance(self, t: Task) -> None:
        assert self.session is not None
        nxt = t.index + 1
        if nxt < len(self.tasks) and (self.tasks[nxt].phase, self.tasks[nxt].batch) == (t.phase, t.batch) and \
                self.session.saved(self.tasks[nxt].item_id, t.phase) is not None:
            self.show(nxt)
            return
        status = self.status.value
        self.resume()
        if self.task is not None and (self.task.phase, self.task.batch) != (t.phase, t.batch):
            status += f" Now the {PHASE_TITLES[self.task.phase].lower()} of batch {self.task.batch + 1}."
        self.status.value = status

    def _prev_index(self) -> Optional[int]:
        t = self.task
        if t is None or t.index == 0:
            return None
        p = self.tasks[t.index - 1]
        return p.index if (p.phase, p.batch) == (t.phase, t.batch) else None

    def back(self) -> None:
        """Previous item within the step of this batch (its saved answer is shown and can be changed)."""
        i = self._prev_index()
        if i is not None:
            self.status.value = ""
            self.show(i)

    def next(self) -> None:
        """Save this screen's answers (unchanged: keep them) and go on; refused until every question is answered."""
        if self.task is None:
            return
        if self._ready():
            self._commit()
        else:
            self.cursor = self._first_open()
            self._refresh()
            self._error("Please answer every question first (the marked one is next).")


def resolve_study_path(params_path: Optional[PathLike] = None, study: Optional[PathLike] = None) -> Path:
    """The study database: ``study``, else ``$CAPAUDIT_STUDY``, else the params file's ``human`` section."""
    if study:
        return Path(study)
    env = os.environ.get("CAPAUDIT_STUDY")
    if env:
        return Path(env)
    if params_path:
        from .stage import study_db_path

        from capaudit.config import load_config

        return study_db_path(load_config(params_path))
    raise InputError("no study database given (pass study=..., set CAPAUDIT_STUDY, or give a params file)")


def annotation_app(params_path: Optional[PathLike] = None, study: Optional[PathLike] = None,
                   invite_code: Optional[str] = None) -> W.Widget:
    """The annotation UI for the study of ``study`` / ``$CAPAUDIT_STUDY`` / ``params_path`` (never raises)."""
    try:
        path = resolve_study_path(params_path, study)
        st = Study.load(path)
    except Exception as exc:  # the details go to the server's log, the annotator reads a sentence
        log.error("annotation notebook: the study cannot be opened: %s", exc)
        box = W.VBox([W.HTML("<h2>Claim verification</h2>"),
                      W.HTML('<p class="capaudit-error">This study cannot be opened right now. Please tell the study '
                             "lead; nothing you answered is lost.</p>")])
        box.add_class("capaudit-annotator")
        return box
    app = AnnotationApp(st, invite_code=invite_code)
    app.root._capaudit_app = app  # keep the app (and its handlers) alive with the widget
    return app.root


__all__ = ["AnnotationApp", "IMAGE_LOADED_CHOICES", "KeyCapture", "annotation_app", "annotator_message",
           "highlight_caption", "load_image", "resolve_study_path"]
