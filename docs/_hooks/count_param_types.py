"""Count the API pages' "Parameters" rows whose type cell is empty.

Build the site, then count (from the repository root):

    PYTHONPATH=$PWD mkdocs build --strict -d /tmp/khn_site
    python docs/_hooks/count_param_types.py /tmp/khn_site

Every table that follows a ``<span class="doc-section-title">Parameters:</span>`` title
in ``api/**/index.html`` is read; a row counts as untyped when its second ``<td>`` holds
no text. Prints the totals, then each untyped row as ``object: parameter``. Not a mkdocs hook
(mkdocs.yml does not name it).
"""
import glob
import os
import re
import sys

TITLE = '<span class="doc-section-title">Parameters:</span>'
ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)
TAG = re.compile(r"<[^>]+>")
OWNER = re.compile(r'id="(keras_hardneg\.[\w.]+)"')


def count(site):
    """Return ``(rows, untyped)``: the number of rows and a list of ``(object, name)``."""
    rows, untyped = 0, []
    for page in sorted(glob.glob(os.path.join(site, "api", "**", "index.html"), recursive=True)):
        with open(page, encoding="utf-8") as f:
            html = f.read()
        parts = html.split(TITLE)
        for i, part in enumerate(parts[1:]):
            owner = OWNER.findall(parts[i])
            owner = owner[-1] if owner else os.path.relpath(page, site)
            table = part[:part.find("</table>")]
            body = table[table.find("<tbody"):] if "<tbody" in table else table
            for row in ROW.findall(body):
                cells = CELL.findall(row)
                if len(cells) < 2:
                    continue
                rows += 1
                if not TAG.sub("", cells[1]).strip():
                    untyped.append((owner, TAG.sub("", cells[0]).strip()))
    return rows, untyped


if __name__ == "__main__":
    total, empty = count(sys.argv[1] if len(sys.argv) > 1 else "site")
    print(f"{total} rows, {len(empty)} without a type")
    for owner, name in empty:
        print(f"  {owner}: {name}")
