"""The annotation notebook front end (ipywidgets + one small anywidget for the keyboard).

One item at a time: the caption phase shows the caption window with the claim highlighted by its
span offsets (no image); the image phase shows the image scaled to fit and the claim (no caption);
the whole-pair step shows both. Large buttons, plus keyboard shortcuts (``1``–``9`` pick an option of
the current question, ``Backspace``/``←`` go back within the phase, ``Enter``/``→`` keep a saved answer
and go on). Keys are captured by :class:`KeyCapture`, whose element and the whole annotator carry
``data-lm-suppress-shortcuts`` — set on the annotator and, on ``focusin``, on every element that takes
focus inside it, because Lumino matches a shortcut's selector on the focused element before walking
to its ancestors — so JupyterLab's notebook shortcuts (number keys → headings, ``b``/``a`` insert a
cell, ``m`` markdown …) stay off while the annotator has focus; handled keys also stop propagating.

Every judgment is committed through :meth:`AnnotatorSession.record` the moment its last question is
answered; the screen says when it is saved. After a kernel restart, page reload or in a second
browser the participant logs in again with the invite code and the UI resumes at the first
unanswered item, rebuilt from the store. A missing or unreadable image offers ``image_unavailable``
instead of failing; a double click records one judgment (clicks carry the screen they were made on,
and clicks within ``debounce_s`` of a new screen are ignored). Errors are shown, never raised.
"""

from __future__ import annotations

import html
import io
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

from .protocol import (
    CATEGORIES, LABELS, PHASE_FIELDS, REASON_TAGS, SCALE_FIELDS, UNAVAILABLE_IMAGE_CHOICES, option_label,
)
from .study import AnnotatorSession, ItemView, Saved, StaleJudgmentError, Study, Task

PathLike = Union[str, Path]
log = logging.getLogger(__name__)

PHASE_TITLES = {
    "caption": ("Caption phase", "Read the caption text. The highlighted part is the claim. The image is hidden."),
    "image": ("Image phase", "Look at the image. Is the claim visible in it? The caption is hidden."),
    "pair": ("Whole pair", "Caption and image together."),
}
MAX_IMAGE_SIDE = 1024

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
    if (host) { host.removeEventListener("keydown", onKey); host.removeEventListener("focusin", onFocus); }
  };
}
export default { render };
"""

_CSS = """
.capaudit-annotator { max-width: 1100px; font-size: 15px; }
.capaudit-annotator .capaudit-caption { font-size: 17px; line-height: 1.5; padding: 10px 14px;
  border: 1px solid #ccc; border-radius: 6px; background: #fafafa; }
.capaudit-annotator mark.capaudit-claim { background: #ffe066; padding: 0 2px; border-radius: 3px; }
.capaudit-annotator .capaudit-claimbox { font-size: 17px; padding: 6px 0; }
.capaudit-annotator .capaudit-current { border-left: 5px solid #1976d2; padding-left: 8px; }
.capaudit-annotator .capaudit-done { border-left: 5px solid #9e9e9e; padding-left: 8px; }
.capaudit-annotator .capaudit-saved { color: #1b5e20; font-weight: bold; }
.capaudit-annotator .capaudit-error { color: #b71c1c; font-weight: bold; }
.capaudit-annotator .capaudit-unavailable { padding: 40px; border: 2px dashed #b71c1c; color: #b71c1c;
  font-size: 18px; text-align: center; }
.capaudit-keys { font-size: 12px; color: #555; padding: 4px 8px; border: 1px dashed #bbb; border-radius: 4px;
  outline: none; margin-top: 6px; }
.capaudit-keys:focus { border-color: #1976d2; color: #1976d2; }
"""


class KeyCapture(anywidget.AnyWidget):
    """A focusable element that sends ``{"kind": "key", "key", "screen"}`` messages for ``capture_keys``."""

    _esm = _KEYS_JS
    _css = _CSS
    screen = traitlets.Unicode("").tag(sync=True)
    capture_keys = traitlets.List(traitlets.Unicode(), default_value=[]).tag(sync=True)
    hint = traitlets.Unicode("").tag(sync=True)
    focus_token = traitlets.Int(0).tag(sync=True)


def highlight_caption(window: str, offsets: Optional[Tuple[int, int]]) -> str:
    """The caption window as HTML with the claim's span wrapped in ``<mark>`` (text escaped)."""
    if not offsets or not 0 <= offsets[0] < offsets[1] <= len(window):
        return html.escape(window)
    s, e = offsets
    return (html.escape(window[:s]) + '<mark class="capaudit-claim">' + html.escape(window[s:e]) + "</mark>"
            + html.escape(window[e:]))


def load_image(path: Optional[str], max_side: int = MAX_IMAGE_SIDE) -> Optional[bytes]:
    """JPEG bytes of the image scaled to at most ``max_side`` pixels; ``None`` if missing or unreadable."""
    if not path:
        return None
    try:
        from PIL import Image

        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=85)
            return buf.getvalue()
    except Exception:  # missing, unreadable, not an image: offer image_unavailable instead
        return None


class AnnotationApp:
    """The annotator UI for one study; :attr:`root` is the widget to display."""

    def __init__(self, study: Study, *, invite_code: Optional[str] = None,
                 clock: Callable[[], float] = time.monotonic, debounce_s: float = 0.35):
        self.study = study
        self.clock = clock
        self.debounce_s = debounce_s
        self.session: Optional[AnnotatorSession] = None
        self.keys = KeyCapture(hint="")
        self.keys.on_msg(self._on_msg)
        self.title = W.HTML("<h2>Claim verification</h2>")
        self.status = W.HTML("")
        self.body = W.VBox([])
        self.root = W.VBox([self.title, self.body, self.status, self.keys])
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
        self.ignored = 0
        self._show_login()
        if invite_code:
            self.login(invite_code)

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
        self.status.value = f'<span class="capaudit-error">{html.escape(msg)}</span>'

    def _show_login(self, message: str = "") -> None:
        self._begin_screen()
        self.code = W.Text(placeholder="invite code, e.g. ABCD-EFGH-JKLM-NPQR", description="Invite code:",
                           layout=W.Layout(width="420px"), continuous_update=False)
        self.code.add_class("capaudit-code")
        self.start = W.Button(description="Start", button_style="primary", layout=W.Layout(width="160px", height="44px"))
        self.start.add_class("capaudit-start")
        self.start.on_click(lambda _b: self._guard(lambda: self.login(self.code.value)))
        self.body.children = [W.HTML("<p>Enter the invite code you were given. Your judgments are saved as you go; "
                                     "you can close the page and come back with the same code.</p>"),
                              W.HBox([self.code, self.start])]
        self._publish_keys([], "")
        if message:
            self._error(message)

    def login(self, invite_code: str) -> bool:
        """Log in with an invite code; shows consent or the first unanswered item."""
        try:
            self.session = self.study.login(invite_code)
        except InputError as exc:
            self._show_login(str(exc).split(": ", 1)[-1] if "invite_code" in str(exc) else str(exc))
            return False
        self.title.value = f"<h2>Claim verification</h2><p>Participant <b>{html.escape(self.session.pseudonym)}</b></p>"
        self.status.value = ""
        if self.session.needs_consent():
            self._show_consent()
        else:
            self.resume()
        return True

    def _show_consent(self) -> None:
        self._begin_screen()
        agree = W.Button(description="I agree — start", button_style="success", layout=W.Layout(width="220px", height="44px"))
        agree.add_class("capaudit-consent")
        agree.on_click(lambda _b: self._guard(self._consent))
        self.body.children = [W.HTML(
            "<h3>Before you start</h3><p>You will judge short claims about images. We store your answers under a "
            "pseudonym only: no name, e-mail address, IP address or browser details. Please do not write personal "
            "or contact information in notes. You can stop at any time; answers given so far are kept.</p>"), agree]
        self._publish_keys([], "")

    def _consent(self) -> None:
        assert self.session is not None
        self.session.give_consent()
        self.resume()

    def resume(self) -> None:
        """Rebuild from the store and go to the first unanswered item (or the end screen)."""
        assert self.session is not None
        self.tasks = self.session.tasks(refresh=True)
        status = self.study.status
        if status != "open":
            self._begin_screen()
            self.task = None
            self.body.children = [W.HTML(f"<h3>The study is not open for annotation ({html.escape(status)}).</h3>"
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
        self.body.children = [self._progress_widget(p, None),
                              W.HTML(f"<h3>All done — thank you!</h3><p>{p.done} of {p.assigned} judgments are saved.</p>")]
        self._publish_keys([], "")

    def _progress_widget(self, p: Any, task: Optional[Task]) -> W.Widget:
        bar = W.IntProgress(value=p.done, min=0, max=max(p.assigned, 1), layout=W.Layout(width="420px"))
        parts = []
        if task is not None:
            n_phase = p.by_phase[task.phase][1]
            parts.append(f"{PHASE_TITLES[task.phase][0]} · item {task.position + 1} of {n_phase}")
        parts.append(f"{p.done} / {p.assigned} judgments done")
        if p.mean_seconds is not None:
            parts.append(f"{p.mean_seconds:.1f} s per judgment")
        label = W.HTML(f'<span class="capaudit-progress">{" · ".join(parts)}</span>')
        return W.HBox([bar, label])

    def show(self, index: int) -> None:
        """Show task ``index`` of the participant's queue."""
        assert self.session is not None
        self.task = t = self.tasks[index]
        self.view = self.session.view(t.item_id, t.phase)
        self.saved = self.session.saved(t.item_id, t.phase)
        self.draft = dict(self.saved.values) if self.saved else {}
        self.draft = {k: (str(v) if k in SCALE_FIELDS else v) for k, v in self.draft.items()
                      if v not in (None, [], 0) or k == "image_unavailable"}
        self.image_bytes = load_image(self.view.image_path) if t.phase in ("image", "pair") else None
        self.image_ok = self.image_bytes is not None
        self._set_order()
        self.cursor = 0
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

    def _choices(self, name: str) -> Tuple[str, ...]:
        assert self.task is not None
        if name == "image_unavailable":
            return ("image_unavailable",)
        if name == "corrected_category":
            return tuple(c for c in CATEGORIES if self.view is None or c != self._item_category())
        if self.task.phase == "image" and name == "image_support" and not self.image_ok:
            return UNAVAILABLE_IMAGE_CHOICES
        return PHASE_FIELDS[self.task.phase][name]

    def _item_category(self) -> str:
        assert self.task is not None
        return self.study.item(self.task.item_id)["category"]

    def _shared(self) -> None:
        """Layouts and styles shared by every button (fewer widget models per screen)."""
        if not hasattr(self, "_opt_layout"):
            self._opt_layout = W.Layout(width="auto", min_width="120px", height="46px")
            self._opt_style = W.ButtonStyle(font_size="15px")
            self._row_layout = W.Layout(flex_flow="row wrap")
            self._nav_layout = W.Layout(width="110px", height="40px")
            self._tag_layout = W.Layout(width="auto")

    def _render(self, keep_screen: bool = False) -> None:
        """Build the item screen (``keep_screen``: same item, its events stay valid)."""
        assert self.session is not None and self.task is not None and self.view is not None
        t, v = self.task, self.view
        self._shared()
        if not keep_screen:
            self._begin_screen()
        title, help_text = PHASE_TITLES[t.phase]
        kids: List[W.Widget] = [self._progress_widget(self.session.progress(), t),
                                W.HTML(f"<h3>{title}</h3><p>{help_text}</p>")]
        if v.caption_window is not None:
            kids.append(W.HTML(f'<div class="capaudit-caption">{highlight_caption(v.caption_window, v.span_offsets)}</div>'))
        if t.phase in ("image", "pair"):
            if self.image_ok:
                img = W.Image(value=self.image_bytes, format="jpeg",
                              layout=W.Layout(max_width="100%", max_height="55vh", width="auto", height="auto",
                                              object_fit="contain"))
                img.add_class("capaudit-image")
                kids.append(img)
            else:
                kids.append(W.HTML('<div class="capaudit-unavailable">Image unavailable — it could not be loaded. '
                                   'Please answer “image unavailable”.</div>'))
        claim = f'Claim: <b>{html.escape(v.claim)}</b>'
        if v.category:
            claim += f' &nbsp;·&nbsp; claim type: <i>{html.escape(v.category.replace("_", " "))}</i>'
        kids.append(W.HTML(f'<div class="capaudit-claimbox">{claim}</div>'))
        self.option_buttons = {}
        self.field_boxes: Dict[str, W.VBox] = {}
        for name in self.order:
            choices = self._choices(name)
            row_btns = []
            for i, val in enumerate(choices):
                label = "image unavailable — skip" if name == "image_unavailable" else option_label(val)
                b = W.Button(description=f"{i + 1}  {label}", layout=self._opt_layout, style=self._opt_style)
                b.add_class(f"capaudit-opt-{name}")
                b.on_click(self._click_handler(name, val))
                row_btns.append(b)
            self.option_buttons[name] = row_btns
            question = LABELS.get(name, "The image could not be shown.")
            box = W.VBox([W.HTML(f"<b>{html.escape(question)}</b>"), W.HBox(row_btns, layout=self._row_layout)])
            self.field_boxes[name] = box
            kids.append(box)
        self._refresh()
        if t.phase == "image":
            kids.append(self._optional_widgets())
        self.back_btn = W.Button(description="◀ Back", layout=self._nav_layout, disabled=self._prev_index() is None)
        self.back_btn.on_click(self._nav_handler("back"))
        self.next_btn = W.Button(description="Next ▶", layout=self._nav_layout,
                                 disabled=self.saved is None)
        self.next_btn.on_click(self._nav_handler("next"))
        state = (f'<span class="capaudit-saved">✓ saved</span> (revision {self.saved.revision})' if self.saved
                 else '<span class="capaudit-unsaved">not answered yet</span>')
        self.item_state = W.HTML(state)
        self.item_state.add_class("capaudit-item-state")
        kids.append(W.HBox([self.back_btn, self.next_btn, self.item_state]))
        self.body.children = kids
        n = max((len(self._choices(f)) for f in self.order), default=0)
        keys = [str(i) for i in range(1, min(n, 9) + 1)] + ["Backspace", "ArrowLeft", "Enter", "ArrowRight"]
        self._publish_keys(keys, "Keys: 1–9 answer the highlighted question · Backspace/← back · Enter/→ next (when saved)")

    def _refresh(self) -> None:
        """Show the current answers and the current question without rebuilding the screen."""
        current = self.order[self.cursor] if self.cursor < len(self.order) else None
        for name, btns in self.option_buttons.items():
            for b, val in zip(btns, self._choices(name)):
                chosen = self.draft.get(name) == val or (name == "image_unavailable" and bool(self.draft.get(name)))
                b.button_style = "primary" if chosen else ""
            box = self.field_boxes[name]
            want = "capaudit-current" if name == current else "capaudit-done"
            if want not in box._dom_classes:
                box._dom_classes = tuple(c for c in box._dom_classes
                                         if c not in ("capaudit-current", "capaudit-done")) + (want,)

    def _optional_widgets(self) -> W.Widget:
        conf_opts = [("–", 0)] + [(str(i), i) for i in range(1, 6)]
        self.confidence = W.ToggleButtons(options=conf_opts, value=int(self.draft.get("confidence") or 0),
                                          description="Confidence (optional):", style={"description_width": "initial",
                                                                                       "button_width": "44px"})
        tags = set(self.draft.get("reason_tags") or [])
        self.tag_buttons = {t: W.ToggleButton(value=t in tags, description=t.replace("_", " "),
                                              layout=self._tag_layout) for t in REASON_TAGS}
        self.note = W.Textarea(value=self.draft.get("note") or "", placeholder=(
            "Optional note (no names, e-mail addresses, phone numbers or links)"), layout=W.Layout(width="520px",
                                                                                                   height="48px"))
        return W.VBox([self.confidence, W.HBox([W.HTML("Reasons (optional): ")] + list(self.tag_buttons.values()),
                                               layout=W.Layout(flex_flow="row wrap")), self.note])

    # -- events --------------------------------------------------------------------------------------
    def _guard(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except InputError as exc:
            self._error(str(exc))
        except Exception as exc:  # never let a handler crash the UI
            log.exception("annotation UI error")
            self._error(f"Something went wrong ({type(exc).__name__}: {exc}). Your saved answers are safe; reload the page.")

    def _fresh(self, token: str) -> bool:
        """Is an event made on the screen ``token`` and not within the debounce window of a new screen?"""
        if token != self.screen_token or self.clock() - self.shown_at < self.debounce_s:
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

        def handler(_b: W.Button) -> None:
            if self._fresh(token):
                self._guard(self.back if action == "back" else self.next)

        return handler

    def _on_msg(self, _widget: Any, content: Dict[str, Any], _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("kind") != "key":
            return
        if not self._fresh(str(content.get("screen", ""))):
            return
        self._guard(lambda: self.key(str(content.get("key", ""))))

    def key(self, key: str) -> None:
        """Act on a key of the current screen."""
        if self.task is None:
            return
        if key in ("Backspace", "ArrowLeft"):
            self.back()
        elif key in ("Enter", "ArrowRight"):
            self.next()
        elif key.isdigit() and self.cursor < len(self.order):
            name = self.order[self.cursor]
            choices = self._choices(name)
            i = int(key) - 1
            if 0 <= i < len(choices):
                self.choose(name, choices[i])

    def choose(self, name: str, value: str) -> None:
        """Answer question ``name``; the judgment is committed when the last question is answered."""
        if self.task is None:
            return
        if name == "image_unavailable":
            self.draft = {"image_unavailable": True}
            self._commit()
            return
        self.draft[name] = value
        if name == "category_check":
            if value != "incorrect":
                self.draft.pop("corrected_category", None)
            self._set_order()
        filled = all(f in self.draft for f in self.order)
        i = self.order.index(name)
        if self.saved is None:
            if filled:
                self._commit()
                return
            todo = [k for k in range(len(self.order)) if self.order[k] not in self.draft]
            self.cursor = next((k for k in todo if k > i), todo[0])
        else:  # a saved screen is walked question by question; the last answer saves a revision
            self.cursor = i + 1
            if self.cursor >= len(self.order) and filled:
                self._commit()
                return
        if list(self.option_buttons) != self.order:  # a question appeared or went away
            self._render(keep_screen=True)
        else:
            self._refresh()

    def _collect(self) -> Dict[str, Any]:
        assert self.task is not None
        values: Dict[str, Any] = {}
        if self.task.phase == "pair" and self.draft.get("image_unavailable"):
            return {"image_unavailable": True}
        for f in self.order:
            values[f] = int(self.draft[f]) if f in ("salient_coverage", "control_usefulness") else self.draft[f]
        if self.task.phase == "image":
            if self.confidence.value:
                values["confidence"] = int(self.confidence.value)
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
        if t.phase == "image":  # keep what was typed if the judgment is refused (e.g. a screened note)
            for k in ("confidence", "reason_tags", "note"):
                self.draft.pop(k, None)
                if k in values:
                    self.draft[k] = values[k]
        elapsed = int(max(0.0, self.clock() - self.item_shown_at) * 1000)
        try:
            res = self.session.record(t.item_id, t.phase, values, expected_revision=self.saved.revision if self.saved else 0,
                                      elapsed_ms=elapsed)
        except StaleJudgmentError:
            self.show(t.index)
            self._error("This item was answered in another window; showing the saved answer.")
            return
        except InputError as exc:
            self._render()
            self._error(str(exc))
            return
        what = "unchanged" if res.duplicate else f"saved (revision {res.revision})"
        self.status.value = (f'<span class="capaudit-saved">✓ {PHASE_TITLES[t.phase][0]}, item {t.position + 1}: '
                             f'{what}</span>')
        self._advance(t)

    def _advance(self, t: Task) -> None:
        assert self.session is not None
        nxt = t.index + 1
        if nxt < len(self.tasks) and self.tasks[nxt].phase == t.phase and \
                self.session.saved(self.tasks[nxt].item_id, t.phase) is not None:
            self.show(nxt)
            return
        self.resume()

    def _prev_index(self) -> Optional[int]:
        t = self.task
        if t is None or t.index == 0 or self.tasks[t.index - 1].phase != t.phase:
            return None
        return t.index - 1

    def back(self) -> None:
        """Previous item within the phase (its saved answer is shown and can be changed)."""
        i = self._prev_index()
        if i is not None:
            self.status.value = ""
            self.show(i)

    def next(self) -> None:
        """Save this screen's answers if they changed (else keep them) and go on; only on answered screens."""
        if self.task is None or self.saved is None:
            return
        if all(f in self.draft for f in self.order):
            self._commit()
        else:
            self._error("Answer every question of this item first.")


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
    except Exception as exc:
        box = W.VBox([W.HTML("<h2>Claim verification</h2>"),
                      W.HTML(f'<p class="capaudit-error">The study cannot be opened: {html.escape(str(exc))}</p>')])
        box.add_class("capaudit-annotator")
        return box
    app = AnnotationApp(st, invite_code=invite_code)
    app.root._capaudit_app = app  # keep the app (and its handlers) alive with the widget
    return app.root


__all__ = ["AnnotationApp", "KeyCapture", "annotation_app", "highlight_caption", "load_image", "resolve_study_path"]
