"""Classify small synthetic shape images with a tf.data input pipeline.

    python shapes_tfdata.py --epochs 10 --steps-per-epoch 200

The images are drawn on the fly (squares, discs, crosses and bars, with noise),
so the script needs no download. A callback prints the loss every N batches.
"""

import argparse

import keras
import numpy as np
import tensorflow as tf
from keras import layers

IMAGE_SIZE = 32
CLASSES = ("square", "disc", "cross", "bar")


def draw(count, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:IMAGE_SIZE, :IMAGE_SIZE]
    labels = rng.integers(0, len(CLASSES), count)
    images = np.zeros((count, IMAGE_SIZE, IMAGE_SIZE, 3), dtype="uint8")
    for i, label in enumerate(labels):
        cy, cx = rng.integers(10, 22, 2)
        r = rng.integers(4, 9)
        if label == 0:
            mask = (abs(yy - cy) < r) & (abs(xx - cx) < r)
        elif label == 1:
            mask = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
        elif label == 2:
            mask = ((abs(yy - cy) < 2) & (abs(xx - cx) < r)) | ((abs(xx - cx) < 2) & (abs(yy - cy) < r))
        else:
            mask = (abs(yy - cy) < 2) & (abs(xx - cx) < 2 * r)
        images[i][mask] = rng.integers(120, 256, 3)
    return images, labels.astype("int32")


def augment(image, label):
    image = tf.image.convert_image_dtype(image, tf.float32)
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.1)
    return image, label


def make_dataset(images, labels, batch_size, training):
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    if training:
        ds = ds.shuffle(2048).repeat()
        ds = ds.map(augment)
    else:
        ds = ds.map(lambda x, y: (tf.image.convert_image_dtype(x, tf.float32), y))
    return ds.batch(batch_size)


def build_model():
    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    x = inputs
    for filters in (32, 64):
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.MaxPooling2D()(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(len(CLASSES))(x)
    return keras.Model(inputs, outputs)


class PrintEvery(keras.callbacks.Callback):
    """Print the running loss every `every` batches."""

    def __init__(self, every):
        super().__init__()
        self.every = every

    def on_train_batch_end(self, batch, logs=None):
        if batch % self.every == 0:
            print(f"  batch {batch}: loss {logs['loss']:.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps-per-epoch", type=int, default=200)
    parser.add_argument("--print-every", type=int, default=50)
    args = parser.parse_args()

    train_images, train_labels = draw(4096, seed=0)
    test_images, test_labels = draw(512, seed=1)
    train = make_dataset(train_images, train_labels, args.batch_size, training=True)
    test = make_dataset(test_images, test_labels, args.batch_size, training=False)

    model = build_model()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        train,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[PrintEvery(args.print_every), keras.callbacks.ModelCheckpoint("shapes.keras")],
        verbose=2,
    )
    loss, accuracy = model.evaluate(test, verbose=0)
    print(f"test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
