"""MkDocs hook: the pages generated from the repository's sources at build time.

- ``examples/NAME.md`` from ``examples/NAME.py`` (keras.io's script form: the header
  docstring's ``Title:`` / ``Shows:`` / ``Run time:`` fields and its commands, then every
  top-level string statement as prose and the code between them as code blocks, and the
  plot the script writes when ``docs/img`` holds it);
- ``zoo.md`` from ``keras_hardneg/zoo_index.json`` (the index the package ships), with each
  entry's recipe from ``models/NAME/recipe.json`` where the clone has it;
- ``api/NAME.md``, one page per public module, one entry per name of its ``__all__`` (read
  statically, so the build imports neither the package nor TensorFlow), rendered by
  mkdocstrings from the docstrings.

Nothing generated is written into ``docs/``: the pages exist only in the build (``mkdocs
serve`` regenerates them when a script, the index or a module changes). The functions are
plain so the tests can call them.
"""

from __future__ import annotations

import ast
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "keras_hardneg"

#: The modules with an API page, in the order of the API index: what ``import
#: keras_hardneg`` exposes (its ``_SUBMODULES``), each documented through its ``__all__``.
API_MODULES = ("losses", "models", "encoders", "augment", "sampling", "data", "evaluation",
               "callbacks", "optimizers", "modalities", "export", "zoo", "run", "tuning",
               "registry", "distribute")


# --------------------------------------------------------------------------- examples


def _split_header(doc: str) -> tuple[dict[str, str], list[str], str]:
    """An example's header docstring: its ``Key: value`` fields (continuation lines
    indented), its indented command lines, and the prose after them."""
    fields: dict[str, str] = {}
    commands: list[str] = []
    prose: list[str] = []
    key = None
    for line in doc.strip("\n").splitlines():
        match = re.match(r"^([A-Z][A-Za-z ]+):\s*(.*)$", line)
        if match and not line.startswith(" ") and not prose and not commands:
            key = match.group(1)
            fields[key] = match.group(2).strip()
        elif not line.strip():
            key = None
            if prose:
                prose.append("")
        elif key is not None and line.startswith(" "):
            fields[key] += " " + line.strip()
        elif line.startswith("    ") and not prose:
            commands.append(line.strip())
        else:
            key = None
            prose.append(line)
    return fields, commands, "\n".join(prose).strip()


def example_page(path: str, img_dir: str | None = None, img_prefix: str = "../img/") -> str:
    """The Markdown page of the keras.io-style script ``path``."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree, clean=False)
    if not doc or "Title:" not in doc:
        raise ValueError(f"{path}: the header docstring has no 'Title:' field")
    fields, commands, prose = _split_header(doc)
    name = os.path.basename(path)
    out = [f"# {fields.pop('Title')}", ""]
    out += [f"**Script:** `examples/{name}`", ""]
    for key in ("Shows", "Run time"):
        if key in fields:
            out += [f"**{key}:** {fields.pop(key)}", ""]
    for key, value in fields.items():
        out += [f"**{key}:** {value}", ""]
    if commands:
        out += ["```bash", *commands, "```", ""]
    if prose:
        out += [prose, ""]
    figure = re.search(r"[\"'](examples_\w+\.png)[\"']", source)
    if figure and img_dir and os.path.isfile(os.path.join(img_dir, figure.group(1))):
        out += [f"![The plot this script writes, from a run of its defaults]"
                f"({img_prefix}{figure.group(1)})", ""]
    lines = source.splitlines()
    body = tree.body[1:]  # after the header docstring
    code_start = body[0].lineno if body else len(lines) + 1
    code_start = _first_line(body[0]) if body else code_start

    def emit_code(first: int, last: int) -> None:
        chunk = lines[first - 1:last]
        while chunk and not chunk[0].strip():
            chunk.pop(0)
        while chunk and not chunk[-1].strip():
            chunk.pop()
        if chunk:
            out.extend(["```python", *chunk, "```", ""])

    cursor = code_start
    for node in body:
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            emit_code(cursor, _first_line(node) - 1)
            out += [_dedent(node.value.value).strip(), ""]
            cursor = node.end_lineno + 1
    emit_code(cursor, len(lines))
    return "\n".join(out)


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def example_title(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read()), clean=False) or ""
    return _split_header(doc)[0].get("Title", os.path.basename(path))


# --------------------------------------------------------------------------- zoo


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _recipe_summary(recipe: dict) -> dict[str, str]:
    def name_of(section):
        value = recipe.get(section)
        if isinstance(value, dict):
            return str(value.get("name", ""))
        return "" if value is None else str(value)

    loss = recipe.get("loss") if isinstance(recipe.get("loss"), dict) else {}
    params = ", ".join(f"{k}={v}" for k, v in loss.items() if k != "name")
    data = recipe.get("data") if isinstance(recipe.get("data"), dict) else {}
    return {"framework": name_of("framework"),
            "loss": name_of("loss") + (f" ({params})" if params else ""),
            "encoder": name_of("encoder"), "sampler": name_of("sampler") or "uniform",
            "data": _data_text(data),
            "epochs": str(recipe.get("epochs", ""))}


def _data_text(data: dict) -> str:
    """``tfds:stl10``, ``tu:MUTAG``, ``image_folder:cifar10-jpg``, ``text_file:...txt``."""
    name = str(data.get("name", ""))
    where = data.get("dataset") or data.get("folder") or data.get("path") or data.get("train")
    if not where:
        return name
    where = os.path.normpath(str(where))
    if name == "image_folder" and os.path.basename(where) in ("train", "test"):
        where = os.path.dirname(where)
    return f"{name}:{os.path.basename(where)}"


def _read_recipe(models_dir: str | None, name: str) -> dict:
    if not models_dir:
        return {}
    for file in ("trained_recipe.json", "recipe.json"):
        path = os.path.join(models_dir, name, file)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return json.load(f)
    return {}


def _input_text(record: dict) -> str:
    spec = record.get("input") or {}
    if "input_shape" in spec:
        return "images [B, " + ", ".join(str(d) for d in spec["input_shape"]) + "]"
    if "max_length" in spec:
        return f"token ids [B, {spec['max_length']}]"
    if record.get("modality") == "graph":
        return "graph batches"
    return ", ".join(f"{k} {v}" for k, v in spec.items())


def _zoo_figures():
    """``keras_hardneg/zoo_figures.py`` loaded by path (it imports nothing of the package:
    no Keras or TensorFlow in the build): the twins table models/README.md also shows."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_khn_zoo_figures", os.path.join(ROOT, PACKAGE, "zoo_figures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The zoo page's sections, in this order: ``(modality, heading)``.
ZOO_MODALITIES = (("image", "Images"), ("graph", "Graphs"), ("text", "Sentences"))
#: Modalities listed in another's group: a retrieval entry is a sentence encoder (token ids
#: -> embedding) fine-tuned on (query, document) pairs.
ZOO_GROUPED = {"retrieval": "text"}


def _zoo_group(record: dict) -> str | None:
    modality = record.get("modality")
    return ZOO_GROUPED.get(modality, modality)


def _entry_links(name: str, models_dir: str | None, repo_url: str | None) -> str:
    """`` · [card](URL) · [recipe](URL)`` for the files the clone holds, on the repository's
    site; empty without a repository URL."""
    if not repo_url or not models_dir:
        return ""
    links = []
    for label, file in (("card", "model_card.md"), ("recipe", "recipe.json")):
        if os.path.isfile(os.path.join(models_dir, name, file)):
            links.append(f"[{label}]({repo_url.rstrip('/')}/blob/main/models/{name}/{file})")
    return "<br>" + " · ".join(links) if links else ""


def _zoo_rows(weights: dict, models_dir: str | None, repo_url: str | None) -> list[str]:
    """The table rows of the zoo page's entries with weights."""
    out = []
    for name, record in weights.items():
        recipe = _recipe_summary(_read_recipe(models_dir, name))
        size = sum(f.get("size", 0) for f in record.get("files", {}).values())
        params = record.get("parameter_count")
        shape = f"{_input_text(record)} -> [B, {record.get('output_dim', '?')}]"
        what = ", ".join(x for x in (recipe["framework"], recipe["loss"],
                                     recipe["encoder"], recipe["data"]) if x)
        if recipe["epochs"]:
            what += f"; {recipe['epochs']} epochs in the recipe"
        out.append("| " + " | ".join([
            f"`{name}`" + _entry_links(name, models_dir, repo_url),
            shape + (f"; {params:,} parameters" if params else ""),
            record.get("figures", ""), what, record.get("trained_on", ""),
            _mb(size) + (f" ({record['weights_dtype']})" if record.get("weights_dtype")
                         else "")]) + " |")
    return out


def zoo_page(index_path: str, models_dir: str | None = None,
             repo_url: str | None = None) -> str:
    """The zoo's page: every entry of the packaged index, those with weights first, each
    group by modality (images, graphs, sentences), linked to its card and recipe on the
    repository's site when ``repo_url`` is given."""
    with open(index_path, encoding="utf-8") as f:
        index = json.load(f)
    entries = index["entries"]
    weights = {n: r for n, r in sorted(entries.items()) if r.get("status") == "weights"}
    recipes = {n: r for n, r in sorted(entries.items()) if r.get("status") != "weights"}
    example = "simclr-hard-cifar10" if "simclr-hard-cifar10" in weights else next(
        iter(weights), "NAME")
    out = ["---", "hide:", "  - navigation", "---", "", "# Model zoo", "",
           "Generated at build time from the index the package ships "
           "(`keras_hardneg/zoo_index.json`, written by `python models/make_index.py`) and "
           "the entries' recipes in `models/`. Load an entry with weights as a trainable "
           "Keras model under TensorFlow or JAX:", "",
           "```python", "import keras_hardneg as khn",
           f"encoder = khn.zoo.load({example!r})", "```", "",
           "How entries are fetched, cached and hosted: the [zoo guide](guides/zoo.md). "
           "Figures are measured on frozen features: images, weighted kNN (k=200, t=0.1) "
           "and a linear probe; graphs, 10-fold SVM accuracy; sentences, STS Spearman x 100 "
           "and SentEval accuracy; retrieval (listed with the sentences), BEIR's nDCG@10, "
           "Recall@100 and MRR@10 on the test queries.", "",
           f"## Entries with weights ({len(weights)})", ""]
    for modality, heading in ZOO_MODALITIES + (("", "Other"),):
        known = {m for m, _ in ZOO_MODALITIES}
        group = {n: r for n, r in weights.items()
                 if (_zoo_group(r) == modality if modality else _zoo_group(r) not in known)}
        if not group:
            continue
        out += [f"### {heading} ({len(group)})", "",
                "| entry | input -> features | figures | recipe | trained on | size |",
                "|---|---|---|---|---|---|"]
        out += _zoo_rows(group, models_dir, repo_url)
        out.append("")
    out += _zoo_figures().twins_markdown(entries)
    out += ["", f"## Recipes without weights yet ({len(recipes)})", "",
            "Each is a recipe a user can train (`keras-hardneg train --recipe "
            "models/NAME/recipe.json --dataset ...`).", "",
            "| entry | modality | recipe | sampler | why no weights |",
            "|---|---|---|---|---|"]
    order = {m: i for i, (m, _) in enumerate(ZOO_MODALITIES)}
    for name, record in sorted(recipes.items(),
                               key=lambda item: (order.get(_zoo_group(item[1]), 9),
                                                 item[0])):
        recipe = _recipe_summary(_read_recipe(models_dir, name))
        what = ", ".join(x for x in (recipe["framework"], recipe["loss"],
                                     recipe["encoder"], recipe["data"]) if x)
        if recipe["epochs"]:
            what += f"; {recipe['epochs']} epochs in the recipe"
        out.append("| " + " | ".join([
            f"`{name}`" + _entry_links(name, models_dir, repo_url), record.get("modality", ""),
            what, recipe["sampler"],
            record.get("why_no_weights", "")]) + " |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- API


def _static_all(path: str) -> list[str]:
    """``__all__`` of a module file: its literal list plus any literal ``+=``."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
        elif (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
              and node.target.id == "__all__"):
            names += list(ast.literal_eval(node.value))
    return names


def module_file(module: str, root: str = ROOT) -> str:
    base = os.path.join(root, PACKAGE, *module.split("."))
    return os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"


def public_names(module: str, root: str = ROOT) -> list[str]:
    """The names module ``keras_hardneg.<module>`` exports (its ``__all__``)."""
    return _static_all(module_file(module, root))


#: Modules documented on a page of their own besides ``API_MODULES``: reached through their
#: full path (``keras_hardneg.zoo_store``), not as ``khn.NAME``. ``{page name: module}``.
EXTRA_API_MODULES = {"zoo_store": "zoo_store", "zoo_figures": "zoo_figures",
                     "run_probe": "run.report.probe", "run_report_page": "run.report.page"}

#: Per module, the names a user reaches for first, in this order; the module's other names
#: follow in its ``__all__``'s order. A name no longer exported is skipped.
LEAD = {
    "modalities": ("Modality", "DataFeed", "Evaluation", "Artifact", "Figure", "modality_of",
                   "get_modality"),
    "losses": ("HardNegativeContrastiveLoss", "DebiasedContrastiveLoss", "NTXentLoss",
               "RingContrastiveLoss", "UnReMixContrastiveLoss", "get", "effective_negatives"),
    "models": ("SimCLR", "MoCoV2", "MoCoV3", "MoCo", "GraphCL", "InfoGraph", "NonFiniteGuard",
               "NonFiniteError"),
    "encoders": ("resnet18_cifar", "resnet50", "small_convnet", "gin", "text_transformer",
                 "pretrained_text", "projection_head", "prediction_head"),
    "augment": ("simclr_augmentation", "SimCLRAugmentation", "graphcl_views", "simclr_views",
                "two_views"),
    "sampling": ("BatchSampler", "UniformSampler", "KNNSampler", "ProximityGraph",
                 "make_dataset", "make_py_dataset"),
    "data": ("load_dataset", "load_digits", "load_cifar", "image_folder", "load_tu",
             "text_file", "tfds_dataset"),
    "evaluation": ("weighted_knn_accuracy", "linear_probe_accuracy", "extract_features",
                   "svm_cross_validation", "sts_scores", "senteval_scores"),
    "callbacks": ("KNNMonitor", "GraphRefreshCallback", "BetaAnnealing", "RingAnnealing",
                  "NonFiniteGuard", "AtomicBackupAndRestore"),
    "optimizers": ("LARS", "WarmupCosineDecay", "SGDL2"),
    "export": ("export_encoder", "load_encoder", "save_preset", "load_preset",
               "load_model_card", "ModelCard"),
    "zoo": ("list", "show", "load", "export", "compare", "entries", "catalog"),
    "run": ("train", "load_recipe", "save_recipe", "restore_run", "evaluate_directory",
            "evaluate_encoder", "DEFAULT_RECIPE"),
    "tuning": ("run_search", "ContrastiveHyperModel", "default_search_space",
               "collect_records", "format_table", "plot_objective"),
    "run.report.page": ("render_page", "write_page", "is_our_page"),
    "run.report.probe": ("NegativesProbe", "read_probe", "make_probe_batch", "score_pairs"),
    "zoo_store": ("read_index", "build_index", "write_index", "fetch_entry", "cached_entry",
                  "cache_state", "verify_files"),
    "zoo_figures": ("entry_metrics", "summarize", "compare_records", "link_twins",
                    "twins_markdown", "METRICS"),
}

#: Classes whose public methods are hooks a subclass overrides, not calls a user makes: in
#: the page's listing they show their summary and constructor only; their hooks are in the
#: page's last section, "For subclass authors", below the TOC's depth. The bases of a
#: family (``ContrastiveModel``) are there whole.
HOOK_CLASSES = {"models": ("SimCLR", "MoCoV2", "MoCoV3", "GraphCL", "InfoGraph")}
BASES = {"models": ("ContrastiveModel", "MomentumContrast"), "losses": ("ContrastiveLoss",),
         "augment": ("ViewMaker",)}

#: Methods every Keras object has: not listed among a class's hooks.
_KERAS_PLUMBING = {"get_config", "from_config", "build", "call", "compute_output_shape"}


def _class_methods(module: str, name: str, root: str = ROOT) -> list[str]:
    """The public methods class ``name`` defines itself, read statically from the files of
    ``keras_hardneg.<module>`` (its package folder, or its file)."""
    base = os.path.join(root, PACKAGE, *module.split("."))
    files = ([os.path.join(base, f) for f in sorted(os.listdir(base)) if f.endswith(".py")]
             if os.path.isdir(base) else [base + ".py"])
    for path in files:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return [m.name for m in node.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and not m.name.startswith("_") and m.name not in _KERAS_PLUMBING]
    return []


def ordered_names(module: str, root: str = ROOT) -> list[str]:
    """The module's public names as its page lists them: ``LEAD`` first, the rest in
    ``__all__``'s order, the family's bases (``BASES``) last."""
    names = public_names(module, root)
    lead = [n for n in LEAD.get(module, ()) if n in names]
    bases = [n for n in BASES.get(module, ()) if n in names]
    return lead + [n for n in names if n not in lead and n not in bases] + bases


def module_summary(module: str, root: str = ROOT) -> str:
    """The first sentence of the module's docstring, its reST roles and literals as
    Markdown code."""
    with open(module_file(module, root), encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = re.split(r"(?<=\.)\s+(?=[A-Z(`:])", paragraph)[0]
    sentence = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", sentence)
    return sentence.replace("``", "`").rstrip(":")


def api_page(module: str, root: str = ROOT) -> str:
    full = f"{PACKAGE}.{module}"
    out = [f"# `{full}`", "", f"::: {full}", "    options:", "      members: false",
           "      show_root_heading: false", "      show_root_toc_entry: false", ""]
    hook_classes = [n for n in HOOK_CLASSES.get(module, ()) if n in public_names(module, root)]
    bases = [n for n in BASES.get(module, ()) if n in public_names(module, root)]
    for name in ordered_names(module, root):
        if name in bases:
            continue
        out += [f"::: {full}.{name}"]
        if name in hook_classes:
            out += ["    options:", "      members: false"]
        out += [""]
    hooks = [(name, _class_methods(module, name, root)) for name in hook_classes]
    if bases or any(methods for _, methods in hooks):
        out += ["## For subclass authors", "",
                "The base classes of the family and the hooks each class overrides: what a "
                "new framework, loss or view maker implements. A user builds, compiles and "
                "fits the classes above.", ""]
        for name in bases:
            out += [f"::: {full}.{name}", "    options:", "      heading_level: 3", ""]
        for name, methods in hooks:
            if methods:
                out += [f"### `{name}`'s hooks", ""]
                for method in methods:
                    out += [f"::: {full}.{name}.{method}", "    options:",
                            "      heading_level: 4", ""]
    return "\n".join(out)


def api_index(root: str = ROOT) -> str:
    out = ["# API reference", "",
           "One page per public module of `keras_hardneg`: each documents every name of the "
           "module's `__all__`, generated from the docstrings (shapes and conventions "
           "included), the names a user reaches for first at the top. `import keras_hardneg "
           "as khn` makes each module reachable as `khn.NAME`; `khn.__version__` is the "
           "package's version (`keras-hardneg --version` prints it).", "",
           "| module | what it holds | public names |", "|---|---|---|"]
    for module in API_MODULES:
        out.append(f"| [`{PACKAGE}.{module}`]({module}.md) | {module_summary(module, root)} "
                   f"| {len(public_names(module, root))} |")
    out += ["", "Modules reached by their full path:", "",
            "| module | what it holds | public names |", "|---|---|---|"]
    for page, module in EXTRA_API_MODULES.items():
        out.append(f"| [`{PACKAGE}.{module}`]({page}.md) | {module_summary(module, root)} "
                   f"| {len(public_names(module, root))} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- CLI


_CLI_HELP = """
import argparse, json, sys
from keras_hardneg.cli import build_parser

def describe(parser, prog):
    formatter = parser._get_formatter()
    groups, commands = [], []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                commands += [[name, helps.get(name) or ""] for name in action.choices]
                continue
            if action.help == argparse.SUPPRESS:
                continue
            default = action.default
            shown = (None if default in (None, False, argparse.SUPPRESS) or action.nargs == 0
                     or isinstance(action, argparse._VersionAction) else repr(default)
                     if not isinstance(default, str) else default)
            rows.append({"invocation": formatter._format_action_invocation(action),
                         "dest": action.dest,
                         "choices": ([str(c) for c in action.choices]
                                     if action.choices is not None else None),
                         "help": formatter._expand_help(action) if action.help else "",
                         "default": shown,
                         "required": bool(action.required and action.option_strings),
                         "positional": not action.option_strings})
        if rows:
            groups.append({"title": group.title, "description": group.description,
                           "rows": rows})
    return {"prog": prog, "usage": parser.format_usage().strip(),
            "description": parser.description or "", "groups": groups,
            "commands": commands}

def walk(prefix, parser, level, out):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                child.prog = f"{prefix} {name}"
                out.append(dict(describe(child, child.prog), level=level))
                walk(child.prog, child, level + 1, out)

parser = build_parser()
parser.prog = "keras-hardneg"
out = [dict(describe(parser, "keras-hardneg"), level=1)]
walk("keras-hardneg", parser, 2, out)
json.dump(out, sys.stdout)
"""

#: The width the usage lines are wrapped at (argparse's own wrapping, at word boundaries):
#: narrow enough for a code block of the page's column, so nothing scrolls out of sight.
CLI_USAGE_COLUMNS = 78


def _cli_anchor(prog: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", prog.lower()).strip("-")


def _cell(text: str) -> str:
    """Help text as a table cell: one line, pipes escaped, ``<`` not taken for HTML, and
    words in upper case with dashes (``--flag``) or ``$VARS`` kept literal."""
    text = " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")
    text = text.replace("<", "&lt;").replace("*", "\\*")
    parts = re.split(r"(`[^`]*`)", text)  # the help's own code spans stay as they are
    return "".join(part if part.startswith("`") else
                   re.sub(r"(?<![\w`])((?:--?|\$)[A-Za-z][\w-]*)", r"`\1`", part)
                   for part in parts)


def cli_commands(root: str = ROOT) -> list[dict]:
    """Every (sub)command of ``keras-hardneg``: its usage, description, options and
    subcommands, read from ``keras_hardneg.cli.build_parser()`` in a child process (it
    imports Keras; ``mkdocs serve`` sees every change)."""
    import subprocess
    import sys

    env = dict(os.environ, COLUMNS=str(CLI_USAGE_COLUMNS + 2), TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                                          if p))
    result = subprocess.run([sys.executable, "-c", _CLI_HELP], cwd=root, env=env,
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"keras-hardneg's parser failed to describe itself:\n"
                           f"{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def _wrap_usage(usage: str, width: int = CLI_USAGE_COLUMNS) -> str:
    """argparse wraps a usage between its arguments; an argument longer than the line (a
    long ``{a,b,c}`` of choices) is broken after a comma, its rest indented under it."""
    out = []
    for line in usage.splitlines():
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        while len(line) > width and "," in line[:width]:
            cut = line.rindex(",", 0, width) + 1
            out.append(line[:cut])
            line = indent + line[cut:]
        out.append(line)
    return "\n".join(out)


def _invocation(row: dict) -> str:
    """``--loss LOSS`` for ``--loss {a,b}`` (the choices go to the meaning column)."""
    text = row["invocation"]
    if row.get("choices"):
        text = re.sub(r"\{[^{}]*\}", row["dest"].upper(), text)
    return ", ".join(f"`{part.strip()}`" for part in text.split(", "))


def cli_markdown(commands: list[dict]) -> str:
    """The command-line page from :func:`cli_commands`: per command its usage (wrapped, in
    full), its description, a table of its subcommands and one per group of options."""
    out = ["# Command-line reference", "",
           "Generated at build time from the parser of `keras-hardneg`: what "
           "`keras-hardneg COMMAND --help` prints, as tables. How the commands fit "
           "together: [Recipes and the CLI](guides/recipes_cli.md).", ""]
    for command in commands:
        level, prog = command["level"], command["prog"]
        if level > 1:
            out += [f"{'#' * level} `{prog}` {{#{_cli_anchor(prog)}}}", ""]
        out += ["```text", _wrap_usage(command["usage"]), "```", ""]
        if command["description"]:
            out += [_cell(command["description"]), ""]
        if command["commands"]:
            out += ["| command | what it does |", "|---|---|"]
            for name, text in command["commands"]:
                anchor = _cli_anchor(f"{prog} {name}")
                out.append(f"| [`{name}`](#{anchor}) | {_cell(text)} |")
            out.append("")
        for group in command["groups"]:
            title = group["title"]
            title = {"positional arguments": "Arguments", "options": "Options",
                     "optional arguments": "Options"}.get(title, title[:1].upper() + title[1:])
            out += [f"**{title}**", ""]
            if group["description"]:
                out += [_cell(group["description"]), ""]
            out += ["| argument | meaning |", "|---|---|"]
            for row in group["rows"]:
                text = _cell(row["help"])
                if row["required"]:
                    text += " **Required.**"
                extra = []
                if row.get("choices"):
                    extra.append("one of " + ", ".join(f"`{c}`" for c in row["choices"]))
                if row["default"] is not None and "default" not in row["help"].lower():
                    extra.append(f"default `{row['default']}`")
                if extra:
                    text = text.rstrip(". ") + ("; " if text else "") + "; ".join(extra)
                out.append(f"| {_invocation(row)} | {text.strip()} |")
            out.append("")
    return "\n".join(out)


def cli_page(root: str = ROOT) -> str:
    """``keras-hardneg``'s reference page: every command's usage and options."""
    return cli_markdown(cli_commands(root))


# --------------------------------------------------------------------------- the hook


def generated_pages(root: str = ROOT, docs_dir: str | None = None,
                    repo_url: str | None = None) -> dict[str, str]:
    """``{path under docs/: Markdown}`` of every generated page."""
    docs_dir = docs_dir or os.path.join(root, "docs")
    pages = {}
    examples = os.path.join(root, "examples")
    for name in sorted(os.listdir(examples)):
        if name.endswith(".py") and not name.startswith("_"):
            pages[f"examples/{name[:-3]}.md"] = example_page(
                os.path.join(examples, name), os.path.join(docs_dir, "img"))
    pages["zoo.md"] = zoo_page(os.path.join(root, PACKAGE, "zoo_index.json"),
                               os.path.join(root, "models"), repo_url)
    pages["cli.md"] = cli_page()
    pages["api/index.md"] = api_index(root)
    for module in API_MODULES:
        pages[f"api/{module}.md"] = api_page(module, root)
    for page, module in EXTRA_API_MODULES.items():
        pages[f"api/{page}.md"] = api_page(module, root)
    return pages


def on_files(files, config):  # noqa: D103 -- MkDocs's hook
    from mkdocs.structure.files import File

    for path, content in generated_pages(docs_dir=config["docs_dir"],
                                         repo_url=config.get("repo_url")).items():
        files.append(File.generated(config, path, content=content))
    return files
