"""The pages of the app, in sidebar order: (file stem in pages/, icon). Titles: locales/common.json "nav_<stem>"."""

PAGES = [
    ("attention", ":material/grid_on:"),
    ("mechanics", ":material/calculate:"),
    ("scaling", ":material/straighten:"),
    ("positions", ":material/waves:"),
    ("optimizers", ":material/landscape:"),
    ("anatomy", ":material/account_tree:"),
    ("train", ":material/model_training:"),
    ("language_model", ":material/text_fields:"),
]
