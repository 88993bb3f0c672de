"""SimCLR augmentation on TensorFlow only: tf.function, a Keras train_step, tf.data
(batched and single images) and XLA (``jit_compile=True``)."""

import keras
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from keras_hardneg.augment import simclr_augmentation  # noqa: E402
from tests.augment.backend_utils import images as _images  # noqa: E402
from tests.augment.backend_utils import n_distinct as _n_distinct  # noqa: E402
from tests.augment.backend_utils import same_image_batch as _same_image_batch  # noqa: E402

if keras.backend.backend() != "tensorflow":
    pytest.skip("TensorFlow-backend tests", allow_module_level=True)


def test_in_tf_function_and_model_fit():
    aug = simclr_augmentation(16, seed=0)
    f = tf.function(lambda x: aug.two_views(x, training=True))
    v1, v2 = f(tf.constant(_images()))
    assert v1.shape == (8, 16, 16, 3) and not np.allclose(v1, v2)

    class Tiny(keras.Model):
        def __init__(self):
            super().__init__()
            self.aug = simclr_augmentation(16, seed=0)
            self.net = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(2)])

        def train_step(self, data):
            x1, x2 = self.aug.two_views(data, training=True)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.net(x1) - self.net(x2)))
            grads = tape.gradient(loss, self.net.trainable_variables)
            self.optimizer.apply(grads, self.net.trainable_variables)
            return {"loss": loss}

        def call(self, x):
            return self.net(x)

    model = Tiny()
    model.compile(optimizer="sgd")
    hist = model.fit(tf.data.Dataset.from_tensor_slices(_images(16)).batch(8), epochs=1,
                     verbose=0)
    assert np.isfinite(hist.history["loss"][0])


# Heavy tier (~50 s: two tf.data traces of the whole v3 pipeline); the pipeline's draws are
# checked eagerly and under XLA in the default suite.
@pytest.mark.heavy
def test_in_tf_data_batched_and_unbatched():
    aug = simclr_augmentation(16, version="v3", seed=0)
    ds = tf.data.Dataset.from_tensor_slices(_same_image_batch(8))
    batched = ds.batch(4).map(lambda x: aug.two_views(x))
    views = list(batched)
    assert len(views) == 2 and views[0][0].shape == (4, 16, 16, 3)
    assert _n_distinct(np.concatenate([v[0] for v in views])) == 8
    single = ds.map(lambda x: aug(x, view=2)).batch(8)
    out = next(iter(single))
    assert out.shape == (8, 16, 16, 3) and _n_distinct(out) == 8



@pytest.mark.parametrize("kwargs", [dict(version="v3", blur_prob=0.5),
                                    dict(exact_color_jitter=True)])
def test_xla_jit_compile_traces_once_and_draws_new_views(kwargs):
    """The TF version used CropAndResize (no XLA kernel); this one compiles under XLA."""
    aug = simclr_augmentation(16, seed=0, **kwargs)
    traces = []

    def views(x):
        traces.append(1)
        return aug.two_views(x, training=True)

    f = tf.function(views, jit_compile=True, autograph=False)
    x = tf.constant(_images(4, 20))
    outs = [f(x) for _ in range(20)]
    assert len(traces) == 1
    assert "HloModule" in f.experimental_get_compiler_ir(x)(stage="hlo")
    first = np.concatenate([np.asarray(v) for v in outs[0]])
    assert first.shape == (8, 16, 16, 3) and 0 <= first.min() and first.max() <= 1
    assert _n_distinct(np.stack([np.asarray(v1) for v1, _ in outs])) == 20


@pytest.mark.xfail(strict=False, reason="keras SeedGenerator reads then increments its state "
                   "in two ops: two tf.data map calls running at once can draw the same seed")
def test_in_tf_data_parallel_map_batches_differ():
    aug = simclr_augmentation(16, seed=0)
    ds = tf.data.Dataset.from_tensor_slices(_same_image_batch(16)).batch(4)
    views = list(ds.map(lambda x: aug.two_views(x), num_parallel_calls=4))
    assert _n_distinct(np.concatenate([v[0] for v in views])) == 16
