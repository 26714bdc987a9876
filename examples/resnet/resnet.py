"""ResNet-50 (He et al., 2015: bottleneck blocks of 3, 4, 6 and 3 in four stages), in Keras.

`width` is the first stage's bottleneck width: 64 is the published ResNet-50 (25.6M
parameters at 1000 classes); a smaller width keeps every layer and connection but divides
the work by about (64 / width)^2, so the same network trains on a CPU. Small images (32x32)
skip the stem's max-pooling, as CIFAR variants do. Batch norm's moving statistics follow the
batches with momentum 0.9 (Keras's default, 0.99, takes thousands of steps to forget their
initial values, and short runs test at chance).
"""

from __future__ import annotations

import tensorflow as tf

STAGES = (3, 4, 6, 3)  # bottleneck blocks per stage: what makes it ResNet-50
EXPANSION = 4  # a bottleneck's output has 4x its inner width
BATCH_NORM_MOMENTUM = 0.9


def _conv_bn(x, filters: int, kernel: int, strides: int = 1, relu: bool = True, name: str = ""):
    x = tf.keras.layers.Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False,
                               kernel_initializer="he_normal", name=f"{name}_conv")(x)
    x = tf.keras.layers.BatchNormalization(momentum=BATCH_NORM_MOMENTUM, name=f"{name}_bn")(x)
    return tf.keras.layers.ReLU(name=f"{name}_relu")(x) if relu else x


def _bottleneck(x, width: int, strides: int, name: str):
    shortcut = x
    if strides != 1 or x.shape[-1] != width * EXPANSION:
        shortcut = _conv_bn(x, width * EXPANSION, 1, strides, relu=False, name=f"{name}_proj")
    x = _conv_bn(x, width, 1, name=f"{name}_a")
    x = _conv_bn(x, width, 3, strides, name=f"{name}_b")
    x = _conv_bn(x, width * EXPANSION, 1, relu=False, name=f"{name}_c")
    return tf.keras.layers.ReLU(name=f"{name}_out")(tf.keras.layers.Add(name=f"{name}_add")(
        [shortcut, x]))


def resnet50(image_size: int = 224, num_classes: int = 1000, width: int = 64
             ) -> tf.keras.Model:
    """ResNet-50 for `image_size`x`image_size` RGB images; outputs logits."""
    images = tf.keras.Input([image_size, image_size, 3], name="images")
    small = image_size < 64
    x = _conv_bn(images, width, 3 if small else 7, 1 if small else 2, name="stem")
    if not small:
        x = tf.keras.layers.MaxPool2D(3, 2, padding="same", name="stem_pool")(x)
    for stage, blocks in enumerate(STAGES):
        for block in range(blocks):
            strides = 2 if block == 0 and stage > 0 else 1
            x = _bottleneck(x, width * 2 ** stage, strides, name=f"stage{stage + 1}_{block + 1}")
    x = tf.keras.layers.GlobalAveragePooling2D(name="pool")(x)
    logits = tf.keras.layers.Dense(num_classes, name="logits")(x)
    return tf.keras.Model(images, logits, name=f"resnet50_w{width}")
