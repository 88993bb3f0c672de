"""Imports flow one way: no import cycle among keras_hardneg's modules (function-level imports
included), each layer imports only the layers below it, and the CLI imports no private name."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "keras_hardneg")

# Lowest first; a module may import its own layer's packages and those of lower layers.
LAYERS = [
    {"_io", "_keras_hub", "_validation", "registry"},
    {"data", "encoders", "augment", "optimizers", "distribute"},
    {"losses", "sampling", "evaluation"},
    {"models"},
    {"callbacks"},
    {"modalities"},
    {"export"},
    {"run", "zoo", "zoo_store", "zoo_figures"},
    {"tuning"},
    {"cli"},
]


def _modules():
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


MODULES = _modules()


def _resolve(name):
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module):
    """Every keras_hardneg module ``module`` imports, at any depth of its code."""
    path = MODULES[module]
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    with open(path) as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            target = _resolve(name)
            if target and target != module and target.startswith("keras_hardneg"):
                # a package's own __init__ imported from inside the package is not an edge
                if module.startswith(target + ".") and MODULES[target].endswith("__init__.py"):
                    continue
                found.add(target)
    return found


EDGES = {m: _imports(m) for m in MODULES}


def test_no_import_cycle():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert cycles == []


def _layer(module):
    top = module.split(".")[1] if "." in module else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"{module}: its top-level name {top!r} is in no layer")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "keras_hardneg"))
def test_imports_flow_down_the_layers(module):
    upward = sorted(t for t in EDGES[module] if t != "keras_hardneg" and _layer(t) > _layer(module))
    assert upward == [], f"{module} (layer {_layer(module)}) imports a higher layer"


# Inside ``run``, lowest first: spreading a run over processes knows nothing else of ``run``;
# the recipe path and the report's drawing parts use it at most; gathering a run's report
# reads runs (recipe, build, artifacts); ``train()`` composes them all.
RUN_LAYERS = [
    ("keras_hardneg.run.distribution",),
    ("keras_hardneg.run.recipe", "keras_hardneg.run.build", "keras_hardneg.run.resume",
     "keras_hardneg.run.artifacts", "keras_hardneg.run.report.progress",
     "keras_hardneg.run.report.probe", "keras_hardneg.run.report.page"),
    ("keras_hardneg.run.report.run_report",),
    ("keras_hardneg.run.training",),
]


def _run_layer(module):
    for i, prefixes in enumerate(RUN_LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _run_layer(m) is not None))
def test_run_imports_flow_down_its_concerns(module):
    upward = sorted(t for t in EDGES[module]
                    if _run_layer(t) is not None and _run_layer(t) > _run_layer(module))
    assert upward == [], f"{module} (run layer {_run_layer(module)}) imports a higher one"


def test_every_run_module_has_a_run_layer():
    loose = sorted(m for m in MODULES if m.startswith("keras_hardneg.run.")
                   and m not in ("keras_hardneg.run.report",) and _run_layer(m) is None)
    assert loose == []


def test_the_cli_imports_no_private_name():
    private = []
    for node in (n for module in CLI_MODULES for n in ast.walk(_tree(module))):
        if isinstance(node, ast.ImportFrom) and node.module and "keras_hardneg" in node.module:
            private += [f"{node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
            private += [node.module] if any(p.startswith("_") for p in node.module.split(".")) \
                else []
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                not node.attr.startswith("__") and isinstance(node.value, ast.Name) and \
                node.value.id in {"run", "export_lib", "tuning", "data", "registry"}:
            private.append(f"{node.value.id}.{node.attr}")
    assert private == []


#: What ``import keras_hardneg`` must not load: these load on first use.
LAZY = ("keras_hardneg.run", "keras_hardneg.export", "keras_hardneg.modalities")

_FRESH_IMPORT = """
import json, sys
import keras_hardneg as khn
before = sorted(m for m in sys.modules if m.startswith("keras_hardneg"))
import keras
stub = keras.saving.get_custom_objects().get("keras_hardneg>SavedModelEncoder")
card = khn.export.ModelCard(name="t", modality="graph")  # export registers the modalities
if keras.backend.backend() == "tensorflow":
    import keras_hardneg.export.load  # registers the class over the stand-in
real = keras.saving.get_custom_objects().get("keras_hardneg>SavedModelEncoder")
print(json.dumps({"before": before, "backend": keras.backend.backend(),
                  "stub": getattr(stub, "__name__", None), "real": getattr(real, "__name__", None),
                  "modalities": khn.registry.MODALITIES.names(),
                  "run": khn.run.modality_of({"data": {"name": "tu"}}).name,
                  "card": card.modality}))
"""


def test_the_package_import_loads_no_run_export_or_modalities_module():
    import json
    import subprocess
    import sys

    root = os.path.dirname(PACKAGE)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, "-c", _FRESH_IMPORT], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    loaded = [m for m in got["before"] if m.startswith(LAZY)]
    assert loaded == [], f"import keras_hardneg loaded {len(loaded)} lazy modules: {loaded}"
    print(f"import keras_hardneg: {len(got['before'])} keras_hardneg modules")
    # first use: the lazy attributes work, and export/run register the built-in modalities
    assert got["run"] == "graph" and got["card"] == "graph"
    assert {"image", "graph", "text"} <= set(got["modalities"])
    if got["backend"] == "tensorflow":  # the SavedModel wrapper: by name until export loads
        assert got["stub"] == "_SavedModelEncoderOnFirstUse" and got["real"] == "SavedModelEncoder"


#: The command line's modules: the package and one module per command and shared piece.
CLI_MODULES = sorted(m for m in MODULES if m == "keras_hardneg.cli"
                     or m.startswith("keras_hardneg.cli."))


def _tree(module):
    with open(MODULES[module]) as f:
        return ast.parse(f.read())


def test_the_cli_package_has_a_module_per_command():
    commands = {"train", "evaluate", "report", "export", "tune", "zoo"}
    assert {f"keras_hardneg.cli.{c}" for c in commands} <= set(CLI_MODULES)
