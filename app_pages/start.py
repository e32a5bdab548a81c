"""Start here: a learning path through attention, one question per step (?step= in the URL), and the glossary
(?part=glossary&term=...)."""

from app_pages import _ui as ui
from app_pages._ui import glossary, path

PARTS = ("path", "glossary")

ui.setup("start")
t = ui.t

part = ui.segmented(t("start.part_label"), PARTS, "part", "path", format_func=lambda p: t(f"start.part_{p}"),
                    label_visibility="collapsed")
if part == "glossary":
    glossary.view()
else:
    path.view()
