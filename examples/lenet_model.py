# lenet_model.py: LeNet on MNIST with the object-style flow.model API of OneFlow v0.4
# (a Model with training_step / validation_step / configure_optimizers, numpy data modules,
# validation every few steps, checkpoints, and a callback that prints the loss and accuracy)
import argparse

import numpy as np
import oneflow as flow

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=100)
parser.add_argument("--max_steps", type=int, default=600)
parser.add_argument("--val_interval", type=int, default=100)
parser.add_argument("--save_dir", type=str, default="./lenet_model")
parser.add_argument("--save_interval", type=int, default=300)
parser.add_argument("--load_dir", type=str, default=None)


class LeNet(flow.model.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def forward(self, images, train=False):
        conv1 = self._conv_pool(images, 32, "conv1", "pool1")
        conv2 = self._conv_pool(conv1, 64, "conv2", "pool2")
        flat = flow.reshape(conv2, [conv2.shape[0], -1])
        hidden = self._dense(flat, 512, "dense1", activation=flow.nn.relu)
        if train:
            hidden = flow.nn.dropout(hidden, rate=0.5, name="dropout")
        return self._dense(hidden, 10, "dense2")

    def _conv_pool(self, x, filters, name, pool_name):
        conv = flow.layers.conv2d(
            x,
            filters,
            5,
            padding="SAME",
            activation=flow.nn.relu,
            kernel_initializer=flow.truncated_normal(0.1),
            name=name,
        )
        return flow.nn.max_pool2d(conv, ksize=2, strides=2, padding="SAME", name=pool_name)

    def _dense(self, x, units, name, activation=None):
        return flow.layers.dense(
            x,
            units,
            activation=activation,
            kernel_initializer=flow.truncated_normal(0.1),
            name=name,
        )

    def training_step(self, batch, optimizer_idx):
        images, labels = batch
        logits = self(images, True)
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(
            labels, logits, name="softmax_loss"
        )
        return loss

    def validation_step(self, batch):
        images, labels = batch
        logits = self(images, False)
        return (labels, flow.nn.softmax(logits))

    def configure_optimizers(self):
        lr_scheduler = flow.optimizer.PiecewiseConstantScheduler([], [0.1])
        return flow.optimizer.SGD(lr_scheduler, momentum=0)


class MnistData(flow.model.NumpyDataModule):
    def __init__(self, images, labels):
        super().__init__()
        self.images = images
        self.labels = labels

    def forward(self, step_idx, optimizer_idx=0):
        i = step_idx % len(self.images)
        return (self.images[i], self.labels[i])


class LossMonitor(flow.model.Callback):
    def on_training_step_end(self, outputs, step_idx, optimizer_idx):
        if step_idx % 10 == 0:
            print("step {:>5}  train loss: {:.6f}".format(step_idx, outputs.mean()))

    def on_validation_step_end(self, outputs, step_idx):
        labels, probabilities = outputs
        predictions = np.argmax(probabilities.numpy(), 1)
        accuracy = np.mean(predictions == labels.numpy()) * 100
        print("step {:>5}  validation accuracy: {:.1f}%".format(step_idx, accuracy))


if __name__ == "__main__":
    args = parser.parse_args()
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(
        args.batch_size, args.batch_size
    )

    train_exe_config = flow.ExecutionConfig()
    train_exe_config.default_data_type(flow.float)
    train_config = flow.model.TrainingConfig()
    train_config.config_execution(train_exe_config)
    train_config.config_data(MnistData(train_images, train_labels))

    val_config = flow.model.ValidationConfig()
    val_config.config_data(MnistData(test_images, test_labels))
    val_config.config_step_interval(args.val_interval)

    ck_config = flow.model.CheckpointConfig()
    if args.load_dir:
        ck_config.config_load(dirpath=args.load_dir)
    ck_config.config_save(dirpath=args.save_dir, step_interval=args.save_interval)

    lenet_md = LeNet(is_deprecated_function_style=True)
    lenet_md.fit(
        training_config=train_config,
        validation_config=val_config,
        checkpoint_config=ck_config,
        callbacks=[LossMonitor()],
        max_steps=args.max_steps,
    )
    print("model saved")
