"""SavedModel export needs the TensorFlow backend: under another backend the export API
raises an error saying so; model cards work everywhere."""

import keras
import pytest

import keras_hardneg as khn

pytestmark = pytest.mark.backends


def test_export_api_under_the_running_backend(tmp_path):
    if keras.backend.backend() == "tensorflow":
        from keras_hardneg.export.write import export_encoder

        assert khn.export.export_encoder is export_encoder
        return
    for name in ("export_encoder", "load_encoder", "SavedModelEncoder"):
        with pytest.raises(RuntimeError, match="needs the TensorFlow backend.*export under TF"):
            getattr(khn.export, name)


def test_model_card_round_trip_without_tensorflow(tmp_path):
    card = khn.export.ModelCard(name="x", description="d", framework="simclr", loss="NTXentLoss",
                                input_shape=(8, 8, 3), output_dim=4)
    (tmp_path / "model_card.json").write_text(card.to_json())
    assert khn.export.load_model_card(str(tmp_path)).output_dim == 4
