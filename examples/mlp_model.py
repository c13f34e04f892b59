# mlp_model.py: an MLP on MNIST with the object-style flow.model API of OneFlow v0.4, Model's default style:
# the model is an eager flow.nn.Module whose parameters flow.optim trains (training_step returns a loss
# tensor; fit calls loss.backward(), the optimizer's step() and zero_grad()), with validation every few
# steps, checkpoints of the module's state_dict, and a callback that prints the loss and accuracy
import argparse

import numpy as np
import oneflow.experimental as flow

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=100)
parser.add_argument("--max_steps", type=int, default=600)
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--val_interval", type=int, default=100)
parser.add_argument("--save_dir", type=str, default="./mlp_model")
parser.add_argument("--save_interval", type=int, default=300)
parser.add_argument("--load_dir", type=str, default=None)


class Linear(flow.nn.Module):
    def __init__(self, in_features, out_features, rng):
        super().__init__()
        bound = 1.0 / np.sqrt(in_features)
        self.weight = flow.nn.Parameter(flow.Tensor(rng.uniform(-bound, bound, (in_features, out_features))))
        self.bias = flow.nn.Parameter(flow.Tensor(rng.uniform(-bound, bound, (out_features,))))

    def forward(self, x):
        return x.matmul(self.weight) + self.bias


def cross_entropy(logits, labels):
    one_hot = flow.Tensor(np.eye(10, dtype=np.float32)[labels])
    return -(logits.log_softmax(1) * one_hot).sum(1).mean()


class MLP(flow.model.Model):
    def __init__(self, hidden, lr, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.fc1 = Linear(28 * 28, hidden, rng)
        self.fc2 = Linear(hidden, 10, rng)
        self.lr = lr

    def forward(self, images):
        return self.fc2(self.fc1(images.flatten(1)).relu())

    def training_step(self, batch, optimizer_idx):
        images, labels = batch
        logits = self(flow.Tensor(images))
        return cross_entropy(logits, labels)

    def validation_step(self, batch):
        images, labels = batch
        logits = self(flow.Tensor(images))
        return (labels, logits.softmax(1))

    def configure_optimizers(self):
        return flow.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


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
            print("step {:>5}  train loss: {:.6f}".format(step_idx, outputs.numpy().mean()))

    def on_validation_step_end(self, outputs, step_idx):
        labels, probabilities = outputs
        predictions = np.argmax(probabilities.numpy(), 1)
        accuracy = np.mean(predictions == labels) * 100
        print("step {:>5}  validation accuracy: {:.1f}%".format(step_idx, accuracy))


if __name__ == "__main__":
    args = parser.parse_args()
    flow.enable_eager_execution()
    (train_images, train_labels), (test_images, test_labels) = flow.data.load_mnist(
        args.batch_size, args.batch_size
    )

    train_config = flow.model.TrainingConfig()
    train_config.config_data(MnistData(train_images, train_labels))

    val_config = flow.model.ValidationConfig()
    val_config.config_data(MnistData(test_images, test_labels))
    val_config.config_step_interval(args.val_interval)

    ck_config = flow.model.CheckpointConfig()
    if args.load_dir:
        ck_config.config_load(dirpath=args.load_dir)
    ck_config.config_save(dirpath=args.save_dir, step_interval=args.save_interval)

    mlp_md = MLP(args.hidden, args.lr)
    mlp_md.fit(
        training_config=train_config,
        validation_config=val_config,
        checkpoint_config=ck_config,
        callbacks=[LossMonitor()],
        max_steps=args.max_steps,
    )
    print("model saved")
