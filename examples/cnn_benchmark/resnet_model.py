"""ResNet for the CNN benchmark example: bottleneck blocks (resnet50/101) or basic blocks (resnet18/34).

Written with the legacy building blocks the v0.4 benchmark models use: variables made by
flow.get_variable, flow.nn.conv2d, flow.layers.batch_normalization, flow.nn pooling and
flow.layers.dense. --base_width shrinks every stage for quick runs (64 is the real network).
"""
import oneflow as flow

DEPTHS = {
    "resnet18": ("basic", [2, 2, 2, 2]),
    "resnet34": ("basic", [3, 4, 6, 3]),
    "resnet50": ("bottleneck", [3, 4, 6, 3]),
    "resnet101": ("bottleneck", [3, 4, 23, 3]),
}


class ResNet:
    def __init__(self, data_format="NCHW", training=True, trainable=True, weight_decay=1.0 / 32768):
        self.data_format = data_format
        self.training = training
        self.trainable = trainable
        self.regularizer = flow.regularizers.l2(weight_decay) if weight_decay else None

    def conv(self, x, filters, kernel, stride, name):
        channels = x.shape[1] if self.data_format == "NCHW" else x.shape[3]
        shape = (filters, channels, kernel, kernel) if self.data_format == "NCHW" else \
            (filters, kernel, kernel, channels)
        weight = flow.get_variable(
            name + "-weight", shape=shape, dtype=x.dtype,
            initializer=flow.variance_scaling_initializer(2, "fan_in", "random_normal",
                                                          data_format=self.data_format),
            regularizer=self.regularizer, trainable=self.trainable)
        return flow.nn.conv2d(x, weight, strides=stride, padding="SAME", data_format=self.data_format, name=name)

    def bn(self, x, name, last=False):
        # the last batch norm of a residual branch starts at zero, so each block starts as identity
        gamma = flow.zeros_initializer() if last else flow.ones_initializer()
        return flow.layers.batch_normalization(
            x, axis=1 if self.data_format == "NCHW" else -1, momentum=0.9, epsilon=1e-5,
            gamma_initializer=gamma, trainable=self.trainable, training=self.training, name=name)

    def conv_bn(self, x, filters, kernel, stride, name, relu=True, last=False):
        y = self.bn(self.conv(x, filters, kernel, stride, name), name + "_bn", last=last)
        return flow.nn.relu(y) if relu else y

    def shortcut(self, x, filters, stride, name):
        channels = x.shape[1] if self.data_format == "NCHW" else x.shape[3]
        if channels == filters and stride == 1:
            return x
        return self.conv_bn(x, filters, 1, stride, name + "_proj", relu=False)

    def bottleneck(self, x, width, stride, name):
        y = self.conv_bn(x, width, 1, 1, name + "_a")
        y = self.conv_bn(y, width, 3, stride, name + "_b")
        y = self.conv_bn(y, width * 4, 1, 1, name + "_c", relu=False, last=True)
        return flow.nn.relu(y + self.shortcut(x, width * 4, stride, name))

    def basic(self, x, width, stride, name):
        y = self.conv_bn(x, width, 3, stride, name + "_a")
        y = self.conv_bn(y, width, 3, 1, name + "_b", relu=False, last=True)
        return flow.nn.relu(y + self.shortcut(x, width, stride, name))

    def __call__(self, images, model, num_classes, base_width=64):
        kind, depths = DEPTHS[model]
        block = self.bottleneck if kind == "bottleneck" else self.basic
        with flow.scope.namespace("Resnet"):
            x = self.conv_bn(images, base_width, 7, 2, "conv1")
            x = flow.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME", data_format=self.data_format,
                                   name="pool1")
            for stage, count in enumerate(depths):
                for i in range(count):
                    stride = 2 if i == 0 and stage > 0 else 1
                    x = block(x, base_width * 2 ** stage, stride, "res{}_{}".format(stage + 2, i))
            spatial = (x.shape[2], x.shape[3]) if self.data_format == "NCHW" else (x.shape[1], x.shape[2])
            x = flow.nn.avg_pool2d(x, ksize=spatial, strides=1, padding="VALID", data_format=self.data_format,
                                   name="pool5")
            x = flow.reshape(x, (x.shape[0], -1))
            return flow.layers.dense(
                x, units=num_classes, use_bias=True,
                kernel_initializer=flow.variance_scaling_initializer(2, "fan_in", "random_normal"),
                bias_initializer=flow.zeros_initializer(), kernel_regularizer=self.regularizer,
                trainable=self.trainable, name="fc1001")


def resnet(images, args, training=True):
    net = ResNet(data_format="NHWC" if args.channel_last else "NCHW", training=training)
    return net(images, args.model, args.num_classes, base_width=args.base_width)
