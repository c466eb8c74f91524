"""report_files.py: a script's --markdown and --json files, each written only when asked for and
whole or not at all (a .tmp beside it, then renamed). Used by scripts/prediction-check.py,
scripts/search-select.py and scripts/search-table.py."""
import json
import os


def write_reports(markdown, text, json_path, doc):
    """text (as it is) to the file markdown and doc (JSON, indent 1) to json_path; None: not
    asked for."""
    if markdown:
        with open(markdown + ".tmp", "w") as f:
            f.write(text)
        os.replace(markdown + ".tmp", markdown)
    if json_path:
        with open(json_path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(json_path + ".tmp", json_path)
