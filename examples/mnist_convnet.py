"""Simple MNIST convnet (after the Keras example "Simple MNIST convnet").

    python mnist_convnet.py --epochs 15
    python mnist_convnet.py --data mnist.npz      # a local copy: arrays x_train, y_train, x_test, y_test
    python mnist_convnet.py --synthetic           # no download: random digits-shaped data

Without --data or --synthetic it downloads MNIST with keras.datasets.mnist.load_data().
"""

import argparse

import keras
import numpy as np
from keras import layers

parser = argparse.ArgumentParser(description="Train a small convnet on MNIST.")
parser.add_argument("--epochs", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--data", help="an .npz file with x_train, y_train, x_test, y_test (as mnist.npz has)")
parser.add_argument("--synthetic", action="store_true", help="random images instead of MNIST, for a quick try")
parser.add_argument("--save", default="mnist_convnet.keras")
args = parser.parse_args()

num_classes = 10
input_shape = (28, 28, 1)

# the data, split between train and test sets
if args.synthetic:
    rng = np.random.default_rng(0)
    y_train = rng.integers(0, num_classes, 6000)
    y_test = rng.integers(0, num_classes, 1000)
    digits = rng.integers(0, 256, (num_classes, 28, 28))
    x_train = np.clip(digits[y_train] + rng.normal(0, 60, (6000, 28, 28)), 0, 255).astype("uint8")
    x_test = np.clip(digits[y_test] + rng.normal(0, 60, (1000, 28, 28)), 0, 255).astype("uint8")
elif args.data:
    with np.load(args.data) as f:
        x_train, y_train = f["x_train"], f["y_train"]
        x_test, y_test = f["x_test"], f["y_test"]
else:
    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()

# Scale images to the [0, 1] range
x_train = x_train.astype("float32") / 255
x_test = x_test.astype("float32") / 255
# Make sure images have shape (28, 28, 1)
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")

# convert class vectors to binary class matrices
y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.1)

score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
model.save(args.save)
