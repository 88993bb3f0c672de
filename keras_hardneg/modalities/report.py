"""The run report's drawing kit for a modality's own sections: figures as data URIs, HTML.

A modality's :meth:`~keras_hardneg.modalities.evaluation.Evaluation.report_sections`
returns ``[(title, html)]``; this module draws them (matplotlib, Agg, every figure a PNG
data URI: the page stays one self-contained file) and holds the section every modality
with class labels can show, a 2-D map of the embeddings (:func:`embedding_map_section`:
t-SNE, scikit-learn, PCA start, of at most :data:`MAP_POINTS` embeddings). The run report's
page itself (:mod:`keras_hardneg.run.report.page`) draws the other sections with it.

Example:
>>> table(("a", "b"), [(1, 2)])
'<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>'
>>> len(subset(10, 3, seed=0)), len(subset(2, 3, seed=0))
(3, 2)
"""

from __future__ import annotations

import base64
import html
import io
from typing import Any, Sequence

import numpy as np

__all__ = ["MAP_POINTS", "NEIGHBOUR_POOL", "DPI", "pyplot", "figure_uri", "img", "note",
           "table", "short", "class_label", "Views", "draw_graph", "draw_image", "tsne", "subset", "unit", "map_figure", "embedding_map_section"]

#: Embeddings in a 2-D map (t-SNE), at most.
MAP_POINTS = 500
#: Training examples searched for nearest neighbours, at most (a seeded subset).
NEIGHBOUR_POOL = 5000
#: PNG resolution.
DPI = 80


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def figure_uri(fig: Any) -> str:
    """A matplotlib figure as a PNG data URI (the figure is closed)."""
    plt = pyplot()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def img(uri: str, alt: str) -> str:
    """An ``<img>`` of a data URI."""
    return f'<img src="{uri}" alt="{html.escape(alt)}">'


def note(text: str) -> str:
    """A note paragraph (``text`` is HTML)."""
    return f'<p class="note">{text}</p>'


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], css: str = "") -> str:
    """An HTML table: ``header`` escaped, the cells as given (HTML)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _layout(num_nodes: int, edges: np.ndarray, seed: int = 0, steps: int = 60) -> np.ndarray:
    """``[n, 2]`` positions of a small graph: a force-directed layout (Fruchterman &
    Reingold 1991) from a circle, in NumPy."""
    n = int(num_nodes)
    angle = 2 * np.pi * np.arange(n) / max(n, 1)
    pos = np.stack([np.cos(angle), np.sin(angle)], 1)
    pos += 0.01 * np.random.default_rng(seed).normal(size=pos.shape)
    if n < 3:
        return pos
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    e = e[(e[:, 0] != e[:, 1]) & (e.max(axis=1) < n)] if len(e) else e
    k = np.sqrt(4.0 / n)
    step = 0.1
    for _ in range(steps):
        delta = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(delta, axis=-1), 1e-3)
        force = (delta / dist[..., None] * (k * k / dist)[..., None]).sum(axis=1)
        if len(e):
            d = pos[e[:, 0]] - pos[e[:, 1]]
            dl = np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-3)
            pull = d / dl * (dl * dl / k)
            np.add.at(force, e[:, 0], -pull)
            np.add.at(force, e[:, 1], pull)
        length = np.maximum(np.linalg.norm(force, axis=1, keepdims=True), 1e-9)
        pos += force / length * np.minimum(length, step)
        step *= 0.95
    return pos


def draw_graph(ax: Any, graph: tuple, seed: int = 0) -> None:
    """Draws ``graph`` = ``(num_nodes, edges [e, 2])`` (node pairs; both directions may be
    listed) on the matplotlib axes ``ax`` as a node-link drawing (a force-directed layout
    computed in NumPy; no graph library needed): a graph modality's gallery drawer.

    >>> fig, ax = pyplot().subplots()
    >>> draw_graph(ax, (4, np.array([[0, 1], [1, 2], [2, 3], [3, 0]])))
    >>> len(ax.lines)
    4
    >>> pyplot().close(fig)
    """
    num_nodes, edges = graph
    pos = _layout(num_nodes, edges, seed)
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    for a, b in e:
        if a < b or (b, a) not in {tuple(x) for x in e}:
            ax.plot(pos[[a, b], 0], pos[[a, b], 1], color="#888", lw=0.8, zorder=1)
    ax.scatter(pos[:, 0], pos[:, 1], s=9, color="#245", zorder=2)
    ax.set_aspect("equal")
    ax.margins(0.15)


def draw_image(ax: Any, image: Any, seed: int = 0) -> None:
    """Shows ``image`` ``[H, W, C]`` in ``[0, 1]`` on the matplotlib axes ``ax``: an image
    modality's gallery drawer (``seed`` unused)."""
    ax.imshow(np.clip(np.asarray(image, np.float32), 0.0, 1.0), interpolation="nearest")


class Views(tuple):
    """A probe example whose two views are different items, ``Views((view1, view2))``
    (retrieval: the query, then its positive document), where a modality's
    ``probe_examples`` gives one item per example: the gallery shows the view it names.

    >>> Views(("a query", "its document")).of(2)
    'its document'
    """

    def of(self, view: int) -> Any:
        """The item of view ``view`` (1 or 2)."""
        return self[view - 1]


def short(text: str, limit: int = 160) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026"


def tsne(features: np.ndarray, seed: int) -> np.ndarray:
    """``[n, 2]``: t-SNE of ``features`` (PCA start, one thread; zeros below 5 points)."""
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    n = len(features)
    if n < 5:
        return np.zeros((n, 2))
    with threadpool_limits(1):  # threads only oversubscribe a busy machine
        return TSNE(2, init="pca", random_state=seed, perplexity=min(30.0, (n - 1) / 3),
                    max_iter=500).fit_transform(np.asarray(features, np.float64))


def subset(n: int, limit: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded subset of ``range(n)`` of at most ``limit``."""
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def unit(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm (float64)."""
    x = np.asarray(x, np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def class_label(label: Any, class_names: Sequence[str] | None = None) -> str:
    """How a figure names class ``label``: ``class_names[label]`` where the data names its
    classes (and the label is an index into them), else the label itself.

    Example:
    >>> class_label(3, ["airplane", "automobile", "bird", "cat"]), class_label(3)
    ('cat', '3')
    """
    if class_names is not None:
        try:
            index = int(label)
        except (TypeError, ValueError):
            return str(label)
        if 0 <= index < len(class_names) and index == label:
            return str(class_names[index])
    return str(label)


def map_figure(points: np.ndarray, labels: Any, title: str,
               class_names: Sequence[str] | None = None) -> str:
    """A 2-D scatter of ``points`` ``[n, 2]`` coloured by ``labels`` ``[n]`` (the legend
    naming them by ``class_names`` when given), as a data URI."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    if labels is None:
        ax.scatter(points[:, 0], points[:, 1], s=7, alpha=0.7, rasterized=True)
    else:
        labels = np.asarray(labels).reshape(-1)
        classes = np.unique(labels)
        cmap = plt.get_cmap("tab10" if len(classes) <= 10 else "tab20")
        for i, c in enumerate(classes):
            sel = labels == c
            ax.scatter(points[sel, 0], points[sel, 1], s=8, alpha=0.75,
                       color=cmap(i % cmap.N), label=class_label(c, class_names),
                       rasterized=True)
        if len(classes) <= 20:
            ax.legend(fontsize=7, markerscale=2, title="class", title_fontsize=8,
                      bbox_to_anchor=(1.01, 1.0), loc="upper left")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=10)
    return figure_uri(fig)


def embedding_map_section(features: np.ndarray, labels: Any, seed: int,
                          what: str = "examples",
                          class_names: Sequence[str] | None = None) -> tuple[str, str]:
    """``("2-D map", html)``: t-SNE of at most :data:`MAP_POINTS` embeddings ``[n, F]``, by
    class (``labels`` ``[n]``, named by ``class_names`` when given)."""
    idx = subset(len(features), MAP_POINTS, seed)
    points = tsne(np.asarray(features)[idx], seed)
    y = None if labels is None else np.asarray(labels).reshape(-1)[idx]
    body = img(map_figure(points, y, f"t-SNE of {len(idx)} {what}' embeddings",
                          class_names), "2-D map") + note(
        f"t-SNE (scikit-learn, PCA start, perplexity {min(30.0, (len(idx) - 1) / 3):.0f}) of "
        f"the trained encoder's features of {len(idx)} {what}"
        f"{' (a seeded subset)' if len(idx) < len(features) else ''}, coloured by class. "
        "Classes that form their own islands are what a kNN classifier finds easy.")
    return "2-D map of the embeddings", body
