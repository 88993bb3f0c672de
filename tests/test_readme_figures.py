"""The benchmarks' summary quotes today's graph results: the figures on docs/benchmarks/index.md
(moved there from the README with the summary) equal docs/benchmarks/graphs.md's GraphCL
table (NT-Xent, uniform batches), so a re-measured table cannot leave the summary behind."""

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


def test_summary_graph_figures_equal_the_benchmark_table():
    means = _graphcl_nt_xent_means()
    summary = _read("docs/benchmarks/index.md")
    paragraph = summary[summary.index("On graphs (GraphCL"):]
    paragraph = re.split(r"\n\s*\n", paragraph)[0]
    quoted = re.findall(r"\b(MUTAG|PTC|PROTEINS|ENZYMES|NCI1|IMDB-B|IMDB-M)\s+(\d+\.\d+)\s+vs",
                        paragraph)
    assert len(quoted) >= 3, paragraph
    for name, figure in quoted:
        assert float(figure) == means[name], (name, figure, means[name])
