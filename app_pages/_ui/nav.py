"""The pages of the app, in sidebar order: (file stem in pages/, icon). Titles: locales/common.json "nav_<stem>".

The root address (/) opens DEFAULT_PAGE, Attention, as it always has: addresses shared before the Start page existed
(/?text=...) keep opening what they showed."""

PAGES = [
    ("start", ":material/school:"),  # first in the sidebar; Attention stays the default address (DEFAULT_PAGE)
    ("attention", ":material/grid_on:"),
    ("mechanics", ":material/calculate:"),
    ("scaling", ":material/straighten:"),
    ("positions", ":material/waves:"),
    ("optimizers", ":material/landscape:"),
    ("anatomy", ":material/account_tree:"),
    ("train", ":material/model_training:"),
    ("language_model", ":material/text_fields:"),
]

DEFAULT_PAGE = "attention"
