"""``keras-hardneg zoo``: list, show, compare, export and publish the pretrained encoders."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from keras_hardneg.cli.errors import CliError
from keras_hardneg.cli.output import figure_rows, print_summary


def add_parser(sub: Any) -> None:
    """Adds ``zoo`` to the subcommands ``sub``."""
    p = sub.add_parser("zoo", help="pretrained encoders: list, show, export, publish",
                       description="The model zoo: $KERAS_HARDNEG_ZOO (a folder or a URL; an "
                                   "entry from a URL is fetched once into "
                                   "~/.keras/keras_hardneg/zoo, checked against the index "
                                   "shipped with the package), else models/ of a clone, else "
                                   "that cache. `zoo list` names the entries with weights and "
                                   "where each is (--all: the recipes too), `zoo show NAME` "
                                   "what one is, `zoo compare A B` two entries' figures "
                                   "side by side (over seeds, with the difference), "
                                   "`zoo export NAME DIR` writes its TF Hub "
                                   "SavedModel (TensorFlow backend), `zoo publish NAME DIR` "
                                   "the folder to upload to host it. In Python: "
                                   "keras_hardneg.zoo.load(NAME) gives a trainable "
                                   "keras.Model under TensorFlow or JAX.")
    p.add_argument("action", choices=("list", "show", "compare", "export", "publish"),
                   help="list the entries, show NAME, compare A B, export NAME DIR, or "
                        "publish NAME DIR")
    p.add_argument("name", nargs="?", help="entry name (show, export, publish; compare: A)")
    p.add_argument("directory", nargs="?",
                   help="folder to write: the SavedModel (export), the hosting folder "
                        "(publish); compare: the second entry B")
    p.add_argument("--overwrite", action="store_true",
                   help="export/publish: replace what keras-hardneg wrote there before "
                        "(default: refuse; other files are never replaced)")
    p.add_argument("--all", action="store_true",
                   help="list: the recipe-only entries too, in a second table")
    p.add_argument("--json", action="store_true", help="list/show/compare: print JSON")
    p.set_defaults(func=cmd_zoo)


def _seed_rows(name: str, results: dict[str, Any], recipe: dict[str, Any] | None) -> list:
    """``zoo show``: the figures over seeds, the baseline and the twin named by
    ``results.json`` (entries trained at several seeds)."""
    from keras_hardneg import zoo_figures as zf

    fields = zf.index_fields(results, recipe)
    rows = []
    if (results.get("seeds") or {}).get("per_seed"):
        rows.append(("over seeds", "; ".join(
            f"{zf.METRICS[k][0]} {zf.format_summary(k, v)}" for k, v in
            fields["metrics"].items()) + f" (weights: seed {fields['weights_seed']})"))
    if fields["baseline"]:
        rows.append(("before training", "; ".join(
            f"{zf.METRICS[k][0]} {zf.format_summary(k, v)}"
            for k, v in fields["baseline"]["metrics"].items())
            + f" ({fields['baseline']['what']})"))
    if fields["twin_name"]:
        rows.append((zf.twin_label(fields.get("twin_what")),
                     f"{fields['twin_name']} (keras-hardneg zoo compare "
                     f"{name} {fields['twin_name']})"))
    return rows


def _print_comparison(table: dict[str, Any]) -> None:
    """``zoo compare A B``: the two entries' rows in columns."""
    a, b = table["names"]
    rows = [("", a, b, "")] + table["setting"] + table["metrics"]
    notes = []
    for label, va, vb, what in table["baseline"]:
        rows.append((label, va, vb, ""))
        if what and what not in notes:
            notes.append(what)
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    for label, va, vb, note in rows:
        print(f"{label:{w0}s}  {va:{w1}s}  {vb:{w2}s}  {note}".rstrip())
    for note in notes:
        print(f"before training: {note}")


def _print_zoo_list(zoo: Any, recipes: bool) -> None:
    """``zoo list``: the entries with weights, where each is (here, cached, to fetch); with
    ``recipes`` the recipe-only entries in a second table."""
    from keras_hardneg import zoo_store

    kind, where = zoo.zoo_source()
    rows = zoo.catalog()
    weights = [r for r in rows if r["status"] == "weights"]
    place = {"local": "here", "cached": "cached", "fetch": "fetch", "unavailable": "not here",
             "damaged": "damaged"}
    w, m = _name_width(rows), _width(rows, "modality")
    print(f"{'entry':{w}s} {'modality':{m}s} {'features':>8s} {'parameters':>11s} {'weights':7s} "
          f"{'size':>8s}  where")
    for r in weights:
        print(f"{r['name']:{w}s} {r['modality']:{m}s} {r['output_dim'] or '-':>8} "
              f"{r['parameter_count'] or 0:>11,} {r['weights_dtype'] or '-':7s} "
              f"{r['size'] / 1e6:>5.1f} MB  {place.get(r['where'], r['where'])}")
    if not weights:
        print("(no entry with weights)")
    print()
    seen = {r["where"] for r in weights}
    if kind == "folder":
        print(f"here: the zoo folder {where}")
    if "cached" in seen:  # a legend only for what the table shows
        print(f"cached: in {zoo_store.cache_root()} (verified; no request)")
    if "fetch" in seen:
        print(f"fetch: from {where} at the first zoo.load, each file checked against the "
              "index shipped with keras-hardneg")
    if "damaged" in seen:
        print("damaged: files differ from the index (the zoo folder's, or the cached copy: "
              + (f"fetched again at the next zoo.load)" if kind == "url" else
                 f"set {zoo.ZOO_ENV} to fetch it again, or delete it)"))
    if "unavailable" in seen:
        print(f"not here: set {zoo.ZOO_ENV} to a URL or folder of the zoo (a copy of the "
              "repository's models/, or what `keras-hardneg zoo publish` writes) to fetch")
    recipe_rows = [r for r in rows if r["status"] != "weights"]
    if recipes:
        print(f"\nRecipes without weights ({len(recipe_rows)}; train one from a clone with "
              "keras-hardneg train --recipe models/ENTRY/recipe.json --output RUN):")
        print(f"{'entry':{w}s} {'modality':{m}s} why no weights")
        for r in recipe_rows:
            print(f"{r['name']:{w}s} {r['modality']:{m}s} {r.get('why_no_weights', '-')}")
    elif recipe_rows:
        print(f"({len(recipe_rows)} recipe-only entries: zoo list --all)")
    _print_twins(weights)


def _name_width(rows: list[dict[str, Any]]) -> int:
    """The width of the ``entry`` column: its longest name (so no row shifts)."""
    return _width(rows, "name", "entry")


def _width(rows: list[dict[str, Any]], key: str, title: str | None = None) -> int:
    """A column's width: its longest value or its title (so no row shifts)."""
    return max([len(title or key)] + [len(str(r[key])) for r in rows])


def _print_twins(rows: list[dict[str, Any]]) -> None:
    """``zoo list``: each entry with a twin beside it (its NT-Xent twin, or the twin its
    ``results.json`` names), the headline figure over seeds and the difference, saying
    whether it is inside the seeds' spread."""
    from keras_hardneg import zoo_figures as zf

    twins = [r for r in rows if r.get("twin")]
    if not twins:
        return
    by_name = {r["name"]: r for r in rows}
    print("\nTwins (mean ± std over seeds (n); the difference is inside the spread when the "
          "seeds of either entry vary as much; `zoo compare A B` for the rest):")
    w = _name_width(twins)
    wt = max(len("twin"), *(len(r["twin"]["name"]) for r in twins))
    print(f"  {'entry':{w}s} {'figure':>17s}   {'twin':{wt}s} {'its figure':>17s}   difference")
    for r in twins:
        t = r["twin"]
        metric = t["metric"]
        print(f"- {r['name']:{w}s} {zf.format_summary(metric, r['metrics'][metric]):>17s}   "
              f"{t['name']:{wt}s} "
              f"{zf.format_summary(metric, by_name[t['name']]['metrics'].get(metric)):>17s}   "
              f"{zf.verdict(metric, t)}")


def cmd_zoo(args: argparse.Namespace) -> int:
    from keras_hardneg import zoo

    try:
        if args.action == "list":
            if args.json:
                print(json.dumps(zoo.catalog() if args.all else zoo.list()))
            else:
                _print_zoo_list(zoo, args.all)
            return 0
        if not args.name:
            raise CliError(f"zoo {args.action}: give NAME (one of `keras-hardneg zoo list`).")
        if args.action == "compare":
            return _zoo_compare(zoo, args)
        if args.action == "show":
            return _zoo_show(zoo, args)
        if not args.directory:
            raise CliError(f"zoo {args.action}: give NAME DIR (the folder to write).")
        if args.action == "publish":
            return _zoo_publish(zoo, args)
        return _zoo_export(zoo, args)
    except (zoo.ZooError, zoo.PresetError, FileExistsError) as e:
        raise CliError(str(e)) from None


def _zoo_compare(zoo: Any, args: argparse.Namespace) -> int:
    """``zoo compare A B``: two entries' figures side by side."""
    if not args.directory:
        raise CliError("zoo compare: give two entries, A B (e.g. graphcl-hard-mutag "
                       "graphcl-ntxent-mutag).")
    table = zoo.compare(args.name, args.directory)
    if args.json:
        print(json.dumps(table))
    else:
        _print_comparison(table)
    return 0


def _zoo_show(zoo: Any, args: argparse.Namespace) -> int:
    """``zoo show NAME``: what an entry is, where it is and its figures."""
    info = zoo.show(args.name)
    if args.json:
        print(json.dumps(info, default=str))
        return 0
    from keras_hardneg import zoo_store
    from keras_hardneg.modalities import get_modality

    meta, results = info["preset"], info["results"] or {}
    rows = _where_rows(zoo, info) + [("modality", meta["modality"]), ("input", meta["input"])]
    rows += _contract_rows(meta)
    rows += [("features", meta["output_dim"]),
             ("parameters", f"{meta['parameter_count']:,}"),
             ("weights", meta["weights_dtype"])]
    modality = get_modality(meta["modality"])
    rows += figure_rows(results, info.get("recipe"), modality) or [
        ("figures", info.get("figures") or zoo_store.figures_text(results, meta["modality"]))]
    rows += _seed_rows(args.name, results, info.get("recipe"))
    if results.get("epochs_run") is not None:
        rows.append(("epochs run", results["epochs_run"]))
    rows.append(("load", f"keras_hardneg.zoo.load({args.name!r})"))
    print_summary(args.name, rows)
    return 0


def _where_rows(zoo: Any, info: dict[str, Any]) -> list:
    """``zoo show``: the entry's folder, or (shown from the index) why it is not here."""
    if info["path"]:
        return [("path", info["path"])]
    return [("where", {"fetch": f"not fetched yet ({info['size'] / 1e6:.1f} MB at the first "
                                "zoo.load)",
                       "unavailable": f"not here (set {zoo.ZOO_ENV} to fetch it)",
                       "damaged": "cached copy damaged"}.get(info["where"], info["where"]))]


def _contract_rows(meta: dict[str, Any]) -> list:
    """``zoo show``: the images an entry takes, and keras-hub when it needs it."""
    from keras_hardneg.export.preset import image_contract, uses_keras_hub

    rows = []
    contract = image_contract(meta["path"]) if meta.get("path") else None
    if contract:
        rows.append(("images", contract))
    hub = (uses_keras_hub(meta["path"]) if meta.get("path") else
           "keras_hub" in meta.get("needs", []))
    if hub:
        rows.append(("needs", "keras-hub (the [pretrained] extra); keras-hub imports "
                              "TensorFlow when it is installed, also under JAX"))
    return rows


def _zoo_publish(zoo: Any, args: argparse.Namespace) -> int:
    """``zoo publish NAME DIR``: the folder to upload to host an entry."""
    out = zoo.publish(args.name, args.directory, overwrite=args.overwrite)
    files = sorted(os.path.relpath(os.path.join(r, f), out)
                   for r, _, fs in os.walk(out) for f in fs)
    print_summary("published", [
        ("entry folder", out), ("files", ", ".join(files)),
        ("host it", f"upload the content of {os.path.dirname(out)} to a static host; "
                    f"then {zoo.ZOO_ENV}=URL fetches {args.name} from URL/{args.name}/"),
        ("index record", f"{os.path.join(out, 'zoo_record.json')} (an entry new to "
                         "the zoo also needs it in keras_hardneg/zoo_index.json)")])
    return 0


def _zoo_export(zoo: Any, args: argparse.Namespace) -> int:
    """``zoo export NAME DIR``: an entry's TF Hub SavedModel and Keras preset."""
    if os.path.lexists(args.directory) and not args.overwrite:
        raise CliError(f"zoo export: {os.path.abspath(args.directory)} already exists; "
                       "pass --overwrite to replace it (an export of keras-hardneg only).")
    out = zoo.export(args.name, args.directory, overwrite=args.overwrite)
    print_summary("exported", [("SavedModel (TF Hub)", out),
                               ("Keras preset", os.path.join(out, "preset"))])
    return 0
