"""A small DCGAN on MNIST in legacy OneFlow's lazy style: two train jobs share the variables by name.

    python examples/dcgan.py --epoch_num 1 --batch_size 100

train_discriminator scores real images against generated ones and trains only the
discriminator (the generator's variables are built with trainable=False there) on one batch of
fakes followed by reals;
train_generator trains only the generator to make the discriminator answer "real". Images come
from flow.data.load_mnist, scaled to [-1, 1] to match the generator's tanh. Every --print_every
batches a line shows both losses; the end writes a grid of generated digits as a .npy file and a
snapshot with flow.checkpoint.save.
"""
import argparse
import os

import numpy as np
import oneflow as flow
import oneflow.typing as tp

parser = argparse.ArgumentParser(description="DCGAN on MNIST")
parser.add_argument("-e", "--epoch_num", type=int, default=1)
parser.add_argument("-b", "--batch_size", type=int, default=100, help="must divide the 60000 MNIST images")
parser.add_argument("-lr", "--learning_rate", type=float, default=2e-4)
parser.add_argument("--z_dim", type=int, default=100)
parser.add_argument("--width", type=int, default=64, help="channels of the discriminator's first layer")
parser.add_argument("--max_batches", type=int, default=0, help="stop each epoch after this many batches (0: all)")
parser.add_argument("--print_every", type=int, default=100)
parser.add_argument("-save", "--model_save_dir", default="./dcgan_checkpoint")
args = parser.parse_args()


def leaky_relu(x):
    return flow.nn.leaky_relu(x, alpha=0.2)


def weight(name, shape, trainable):
    return flow.get_variable(name + "-weight", shape=shape, initializer=flow.random_normal_initializer(stddev=0.02),
                             trainable=trainable)


def batchnorm(x, name, trainable):
    return flow.layers.batch_normalization(x, axis=1, momentum=0.9, epsilon=1e-5, trainable=trainable, name=name)


def generator(z, trainable):
    w = args.width
    h = flow.layers.dense(z, 2 * w * 7 * 7, use_bias=False, trainable=trainable, name="g_fc",
                          kernel_initializer=flow.random_normal_initializer(stddev=0.02))
    h = leaky_relu(batchnorm(h, "g_bn0", trainable))
    h = flow.reshape(h, (-1, 2 * w, 7, 7))
    n = h.shape[0]
    h = flow.nn.conv2d_transpose(h, weight("g_deconv1", (2 * w, w, 5, 5), trainable),
                                 output_shape=(n, w, 14, 14), strides=2, padding="SAME", name="g_deconv1")
    h = leaky_relu(batchnorm(h, "g_bn1", trainable))
    h = flow.nn.conv2d_transpose(h, weight("g_deconv2", (w, 1, 5, 5), trainable),
                                 output_shape=(n, 1, 28, 28), strides=2, padding="SAME", name="g_deconv2")
    return flow.math.tanh(h)


def discriminator(images, trainable):
    w = args.width
    h = flow.nn.conv2d(images, weight("d_conv1", (w, 1, 5, 5), trainable), strides=2, padding="SAME")
    h = leaky_relu(h)
    h = flow.nn.conv2d(h, weight("d_conv2", (2 * w, w, 5, 5), trainable), strides=2, padding="SAME")
    # no batch norm here: the train_discriminator batch mixes fakes and reals, train_generator's holds
    # fakes only, and batch statistics would let the discriminator tell the two jobs apart
    h = leaky_relu(h)
    h = flow.reshape(h, (h.shape[0], -1))
    return flow.layers.dense(h, 1, trainable=trainable, name="d_fc",
                             kernel_initializer=flow.random_normal_initializer(stddev=0.02))


def adam():
    return flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [args.learning_rate]), beta1=0.5)


Z = tp.Numpy.Placeholder((args.batch_size, args.z_dim))
Images = tp.Numpy.Placeholder((args.batch_size, 1, 28, 28))


@flow.global_function(type="train")
def train_discriminator(z: Z, images: Images) -> tp.Numpy:
    # one discriminator pass over fakes then reals: its ops are built once in the job
    both = flow.concat([generator(z, trainable=False), images], axis=0)
    logits = discriminator(both, trainable=True)
    b = args.batch_size
    labels = flow.concat([flow.constant(0.0, dtype=flow.float, shape=(b, 1)),
                          flow.constant(1.0, dtype=flow.float, shape=(b, 1))], axis=0)
    loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(labels, logits))
    adam().minimize(loss)
    return loss


@flow.global_function(type="train")
def train_generator(z: Z) -> tp.Numpy:
    fake_logits = discriminator(generator(z, trainable=True), trainable=False)
    loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(flow.ones_like(fake_logits), fake_logits))
    adam().minimize(loss)
    return loss


@flow.global_function(type="predict")
def generate(z: Z) -> tp.Numpy:
    return generator(z, trainable=False)


def main():
    (train_images, _), _ = flow.data.load_mnist(args.batch_size, 100)  # the test split goes unused
    rng = np.random.RandomState(0)
    fixed_z = rng.normal(0, 1, (args.batch_size, args.z_dim)).astype(np.float32)
    for epoch in range(args.epoch_num):
        batches = len(train_images) if args.max_batches <= 0 else min(args.max_batches, len(train_images))
        for i in range(batches):
            images = (train_images[i].astype(np.float32) * 2.0 - 1.0).reshape(args.batch_size, 1, 28, 28)
            z = rng.normal(0, 1, (args.batch_size, args.z_dim)).astype(np.float32)
            d_loss = float(train_discriminator(z, images))
            g_loss = float(train_generator(z))
            if (i + 1) % args.print_every == 0:
                print("epoch {} batch {} d_loss {:.6f} g_loss {:.6f}".format(epoch + 1, i + 1, d_loss, g_loss),
                      flush=True)
    samples = generate(fixed_z)[:16, 0]  # a 4 x 4 grid of digits, pixels in [-1, 1]
    grid = samples.reshape(4, 4, 28, 28).transpose(0, 2, 1, 3).reshape(4 * 28, 4 * 28)
    os.makedirs(args.model_save_dir, exist_ok=True)
    np.save(os.path.join(args.model_save_dir, "samples.npy"), grid)
    flow.checkpoint.save(os.path.join(args.model_save_dir, "model"))
    print("saved", args.model_save_dir)


if __name__ == "__main__":
    main()
