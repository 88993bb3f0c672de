import numpy as np
import pytest


def clustered(n=2000, d=16, classes=20, noise=1.0, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, d)) * 2.0
    y = rng.integers(0, classes, n)
    x = centers[y] + noise * rng.normal(size=(n, d))
    return x.astype(np.float32), y


@pytest.fixture(scope="session")
def data():
    return clustered()
