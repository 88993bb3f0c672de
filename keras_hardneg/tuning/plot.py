"""The objective over the ``beta`` - ``tau_plus`` plane, as a PNG (matplotlib, Agg backend).

Example:
>>> recs = [{"trial_id": "0", "status": "COMPLETED", "objective": 0.7, "beta": 0.5,
...          "tau_plus": 0.05},
...         {"trial_id": "1", "status": "COMPLETED", "objective": 0.8, "beta": 1.5,
...          "tau_plus": 0.1}]
>>> plot_objective(recs, "/tmp/khn-plot-doc.png")
'/tmp/khn-plot-doc.png'
"""

import math

from keras_hardneg.tuning.records import trial_number

__all__ = ["plot_objective"]


def plot_objective(records, path, objective_name="objective", title=None):
    """Scatter of the trials at ``(beta, tau_plus)``, coloured by objective; best starred.

    Failed trials are grey crosses. A loss without ``beta`` or ``tau_plus``
    (``None`` in the records) is drawn at 0 on that axis.

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI

    def xy(r):
        return (r.get("beta") or 0.0), (r.get("tau_plus") or 0.0)

    done = [r for r in records if r.get("status") == "COMPLETED"
            and r.get("objective") is not None and math.isfinite(r["objective"])]
    failed = [r for r in records if r not in done]
    fig = Figure(figsize=(6, 4.5), dpi=110)
    ax = fig.add_subplot(1, 1, 1)
    if done:
        xs, ys = zip(*(xy(r) for r in done))
        vals = [r["objective"] for r in done]
        sc = ax.scatter(xs, ys, c=vals, cmap="viridis", s=70, edgecolors="k", linewidths=0.5,
                        zorder=2)
        fig.colorbar(sc, ax=ax, label=objective_name)
        best = max(done, key=lambda r: r["objective"])
        bx, by = xy(best)
        ax.scatter([bx], [by], marker="*", s=400, facecolors="none", edgecolors="red",
                   linewidths=1.5, zorder=3,
                   label=f"best: trial {trial_number(best['trial_id'])} "
                         f"({best['objective']:.4g})")
        for r in done:  # numbered from 1, as Keras Tuner and the table number them
            x, y = xy(r)
            ax.annotate(trial_number(r["trial_id"]), (x, y), textcoords="offset points",
                        xytext=(5, 4), fontsize=7)
    if failed:
        xs, ys = zip(*(xy(r) for r in failed))
        ax.scatter(xs, ys, marker="x", c="0.5", s=50, zorder=2, label="failed")
    if done or failed:
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel("beta (hardness concentration)")
    ax.set_ylabel("tau_plus (class prior)")
    ax.set_title(title or f"{objective_name} over beta - tau_plus ({len(done)} trials)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return path
