"""Train a CNN in the style of the OneFlow v0.4 ImageNet benchmark, on synthetic images.

    python examples/cnn_benchmark/train.py --model resnet50 --image_size 224 --num_examples 1024

Synthetic mode feeds random images and labels made by flow.data.decode_random inside the jobs,
so the run measures the model, not the input pipeline. Every --loss_print_every_n_iter steps the
train job's async_get callback prints loss, top-1 accuracy and samples per second; after each epoch
a validation pass prints its top-1 and a snapshot goes to --model_save_dir/snapshot_epoch_<n>.
"""
import argparse
import math
import os
import time

import oneflow as flow

import job_config
import resnet_model


def get_parser():
    parser = argparse.ArgumentParser(description="CNN benchmark example on synthetic data")
    parser.add_argument("--model", default="resnet50", choices=sorted(resnet_model.DEPTHS))
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--num_classes", type=int, default=1000)
    parser.add_argument("--base_width", type=int, default=64, help="channels of the first stage")
    parser.add_argument("--channel_last", type=lambda s: s.lower() in ("1", "true", "yes"), default=False)
    parser.add_argument("--num_examples", type=int, default=1281167)
    parser.add_argument("--num_val_examples", type=int, default=50000)
    parser.add_argument("--batch_size_per_device", type=int, default=64)
    parser.add_argument("--val_batch_size_per_device", type=int, default=8)
    parser.add_argument("--gpu_num_per_node", type=int, default=1)
    parser.add_argument("--num_nodes", type=int, default=1)
    parser.add_argument("--num_epochs", type=int, default=90)
    parser.add_argument("--warmup_epochs", type=float, default=5)
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    parser.add_argument("--learning_rate", type=float, default=0.256)
    parser.add_argument("--momentum", type=float, default=0.875)
    parser.add_argument("--lr_decay", default="cosine", choices=["cosine", "piecewise", "none"])
    parser.add_argument("--lr_decay_epochs", type=float, nargs="*", default=[30, 60, 80])
    parser.add_argument("--lr_decay_rate", type=float, default=0.1)
    parser.add_argument("--grad_clipping", action="store_true")
    parser.add_argument("--use_fp16", action="store_true")
    parser.add_argument("--model_load_dir", default="", help="a snapshot to start from")
    parser.add_argument("--model_save_dir", default="./output/snapshots")
    parser.add_argument("--log_dir", default="./output/log")
    parser.add_argument("--loss_print_every_n_iter", type=int, default=10)
    return parser


def synthetic_batch(args, batch_size):
    shape = (args.image_size, args.image_size, 3) if args.channel_last else (3, args.image_size, args.image_size)
    images = flow.data.decode_random(shape, dtype=flow.float, batch_size=batch_size,
                                     initializer=flow.random_uniform_initializer(-1.0, 1.0))
    labels = flow.data.decode_random((), dtype=flow.int32, batch_size=batch_size,
                                     initializer=flow.zeros_initializer(flow.int32))
    return images, labels


class Metric:
    """Accumulates what the jobs hand back and prints one line per period."""

    def __init__(self, desc, batch_size, print_every):
        self.desc, self.batch_size, self.print_every = desc, batch_size, print_every
        self.reset()

    def reset(self):
        self.loss, self.correct, self.seen, self.steps, self.start = 0.0, 0, 0, 0, time.time()

    def callback(self, epoch, step):
        def on_result(outputs):
            if self.desc == "train":
                loss, predictions, labels = outputs
                self.loss += float(loss.numpy().mean())
            else:
                predictions, labels = outputs
            self.correct += int((predictions.numpy().argmax(axis=1) == labels.numpy()).sum())
            self.seen += labels.shape[0]
            self.steps += 1
            if (step + 1) % self.print_every == 0:
                self.report(epoch, step)

        return on_result

    def report(self, epoch, step):
        if self.steps == 0:
            return
        throughput = self.seen / max(time.time() - self.start, 1e-9)
        if self.desc == "train":
            print("train: epoch {}, iter {}, loss: {:.6f}, top_1: {:.4f}, samples/s: {:.1f}".format(
                epoch, step + 1, self.loss / self.steps, self.correct / self.seen, throughput), flush=True)
        else:
            print("validation: epoch {}, top_1: {:.4f}, samples/s: {:.1f}".format(
                epoch, self.correct / self.seen, throughput), flush=True)
        self.reset()


def main(args):
    flow.env.log_dir(args.log_dir)
    flow.config.gpu_device_num(args.gpu_num_per_node)
    train_batch = job_config.train_batch_size(args)
    val_batch = job_config.val_batch_size(args)

    @flow.global_function("train", job_config.get_train_config(args))
    def TrainNet():
        images, labels = synthetic_batch(args, train_batch)
        logits = resnet_model.resnet(images, args, training=True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="softmax_loss")
        loss = flow.math.reduce_mean(loss)
        job_config.make_optimizer(args).minimize(loss)
        return loss, flow.nn.softmax(logits), labels

    @flow.global_function("predict", job_config.get_val_config(args))
    def InferenceNet():
        images, labels = synthetic_batch(args, val_batch)
        logits = resnet_model.resnet(images, args, training=False)
        return flow.nn.softmax(logits), labels

    if args.model_load_dir:
        flow.load_variables(flow.checkpoint.get(args.model_load_dir))
        print("restored the snapshot", args.model_load_dir)

    train_metric = Metric("train", train_batch, args.loss_print_every_n_iter)
    steps = job_config.steps_per_epoch(args)
    val_steps = max(1, math.ceil(args.num_val_examples / val_batch))
    for epoch in range(args.num_epochs):
        train_metric.reset()
        for step in range(steps):
            TrainNet().async_get(train_metric.callback(epoch, step))
        val_metric = Metric("validation", val_batch, val_steps)
        for step in range(val_steps):
            InferenceNet().async_get(val_metric.callback(epoch, step))
        snapshot = os.path.join(args.model_save_dir, "snapshot_epoch_{}".format(epoch))
        flow.checkpoint.save(snapshot)  # waits for the jobs in flight, like every variable read
        print("saved", snapshot, flush=True)
    flow.sync_default_session()


if __name__ == "__main__":
    main(get_parser().parse_args())
