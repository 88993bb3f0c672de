"""sync_batchnorm=True reduces BN statistics across replicas (2 logical CPUs, MirroredStrategy).

Runs in a subprocess: logical devices must be configured before TensorFlow initialises.
"""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from keras_hardneg.encoders import projection_head
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x = np.random.default_rng(0).normal(size=(8, 4)).astype("float32")
    x[4:] += 5.0   # the second replica's half is shifted: local != global variance
    ds = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensors(x).with_options(tf.data.Options()))
    batch = next(iter(ds))
    for sync in (True, False):
        with strategy.scope():
            head = projection_head(4, 8, 2, version="simclr_v1", sync_batchnorm=sync)
        strategy.run(tf.function(lambda b: head(b, training=True)), args=(batch,))
        pre = x @ head.hidden_layers[0][0].kernel.numpy()
        expect = 0.1 * pre.var(axis=0) + 0.9      # BN momentum 0.9, from ones
        got = head.hidden_layers[0][1].moving_variance.numpy()
        print("SYNC", sync, bool(np.allclose(got, expect, rtol=1e-3, atol=1e-4)))
""")


@pytest.mark.heavy  # heavy tier since 2026-11-29 (suite time: docs/notes/suite_time.md)
def test_synchronized_bn_uses_global_batch_statistics():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300)
    lines = [l for l in out.stdout.splitlines() if l.startswith("SYNC")]
    assert lines == ["SYNC True True", "SYNC False False"], out.stdout + out.stderr[-2000:]
