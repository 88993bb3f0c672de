"""The README's graph figures are today's results: they equal docs/benchmarks/graphs.md's GraphCL
table (NT-Xent, uniform batches), so a re-measured table cannot leave the README behind."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def _graphcl_nt_xent_means():
    text = _read("docs/benchmarks/graphs.md")
    table = text[text.index("### GraphCL: losses x batches"):]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row = next(line for line in lines if re.match(r"\|\s*nt_xent\s*\|\s*uniform\s*\|", line))
    cells = [c.strip() for c in row.strip("|").split("|")]
    return {name: float(cell.split("±")[0]) for name, cell in zip(header[2:], cells[2:]) if cell}


def test_readme_graph_figures_equal_the_benchmark_table():
    means = _graphcl_nt_xent_means()
    readme = _read("README.md")
    paragraph = readme[readme.index("On graphs (GraphCL"):]
    paragraph = re.split(r"\n\s*\n", paragraph)[0]
    quoted = re.findall(r"\b(MUTAG|PTC|PROTEINS|ENZYMES|NCI1|IMDB-B|IMDB-M)\s+(\d+\.\d+)\s+vs",
                        paragraph)
    assert len(quoted) >= 3, paragraph
    for name, figure in quoted:
        assert float(figure) == means[name], (name, figure, means[name])
