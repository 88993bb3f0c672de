"""Reading an export's ``saved_model.pb`` without loading it: parsing and device placements."""

from __future__ import annotations

import os

__all__ = ["find_device_strings", "parse_saved_model_pb"]


def parse_saved_model_pb(export_dir):
    """The ``SavedModel`` protobuf of ``export_dir``; ``ValueError`` naming it if corrupt."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    pb = os.path.join(export_dir, "saved_model.pb")
    sm = saved_model_pb2.SavedModel()
    try:
        with open(pb, "rb") as f:
            sm.ParseFromString(f.read())
    except DecodeError as e:
        raise ValueError(f"{export_dir}: saved_model.pb is corrupt ({e})") from None
    if not sm.meta_graphs:
        raise ValueError(f"{export_dir}: saved_model.pb is corrupt (no meta graph)")
    return sm


def find_device_strings(export_dir) -> list[str]:
    """Device placements in the model's computation (``[]`` = device-agnostic).

    Checks every node of every function reachable from the saved objects
    (``__call__`` in both modes, ``serving_default``, ``regularization_losses``) and
    the saved variables. Not checked: TensorFlow's own checkpoint save/restore
    functions for the TF1 ``saver_def`` (``__inference__traced_save/restore_*``),
    which TF always places on the host CPU; they only do file I/O.

    Example: ``assert find_device_strings(d) == []``.
    """
    sm = parse_saved_model_pb(os.fspath(export_dir))
    found = []
    for mg in sm.meta_graphs:
        library = {f.signature.name: f for f in mg.graph_def.library.function}
        todo = list(mg.object_graph_def.concrete_functions.keys())
        seen = set()
        while todo:
            name = todo.pop()
            if name in seen or name not in library:
                continue
            seen.add(name)
            for node in library[name].node_def:
                if node.device:
                    found.append(f"{name}/{node.name}: {node.device}")
                for attr in node.attr.values():
                    if attr.HasField("func"):
                        todo.append(attr.func.name)
                    todo.extend(f.name for f in attr.list.func)
        for obj in mg.object_graph_def.nodes:
            if obj.WhichOneof("kind") == "variable" and obj.variable.device:
                found.append(f"variable {obj.variable.name}: {obj.variable.device}")
    return found
