"""What the commands print and where they write: the summary block, a modality's figure
rows, a checked output folder."""

from __future__ import annotations

from typing import Any

from keras_hardneg.cli.errors import CliError


def print_summary(title: str, rows: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n== {title} ==")
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")


def output_folder(path: str, flag: str = "--output", create: bool = True) -> str:
    """``path`` made absolute, checked writable (a file or a read-only place: one line);
    ``create=False`` leaves a missing folder to the command (``train`` makes it)."""
    from keras_hardneg.run.resume import OutputDirError, check_output_dir

    try:
        return check_output_dir(path, flag, create=create)
    except OutputDirError as e:
        raise CliError(str(e)) from None


def figure_rows(result: dict[str, Any], recipe: dict[str, Any] | None,
                 modality: Any = None) -> list:
    """Summary rows of a modality's figures (its own names: ``Modality.summary_rows``);
    the modality is ``modality``, else the recipe's, else the one ``result`` names."""
    from keras_hardneg.modalities import modality_of, modality_of_results

    if modality is None:
        modality = (modality_of(recipe) if recipe and "data" in recipe
                    else modality_of_results(result))
    return modality.summary_rows(result, recipe)
