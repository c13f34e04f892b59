"""Function configs and the optimizer of the CNN benchmark example, in legacy OneFlow's style.

The train and validation jobs share one base config; the train one adds the options the v0.4
benchmark set for speed (fused model updates, in-place ops), which flowjob accepts as legacy did.
"""
import math

import oneflow as flow


def _base_config(args):
    config = flow.function_config()
    config.default_logical_view(flow.scope.consistent_view())
    config.default_data_type(flow.float)
    if args.use_fp16:
        config.enable_auto_mixed_precision(True)
    return config


def get_train_config(args):
    config = _base_config(args)
    config.enable_inplace(True)
    config.enable_fuse_model_update_ops(True)
    config.cudnn_conv_heuristic_search_algo(False)
    return config


def get_val_config(args):
    return _base_config(args)


def steps_per_epoch(args):
    return max(1, math.ceil(args.num_examples / train_batch_size(args)))


def train_batch_size(args):
    return args.batch_size_per_device * args.gpu_num_per_node * args.num_nodes


def val_batch_size(args):
    return args.val_batch_size_per_device * args.gpu_num_per_node * args.num_nodes


def make_lr_scheduler(args):
    """Learning rate: linear warm-up over --warmup_epochs, then cosine or piecewise decay."""
    per_epoch = steps_per_epoch(args)
    warmup_steps = int(args.warmup_epochs * per_epoch)
    warmup = flow.optimizer.warmup.linear(warmup_steps, 0) if warmup_steps > 0 else None
    base_lr = args.learning_rate * train_batch_size(args) / 256.0  # the usual linear scaling rule
    if args.lr_decay == "cosine":
        return flow.optimizer.CosineScheduler(base_lr, steps=args.num_epochs * per_epoch, warmup=warmup)
    if args.lr_decay == "piecewise":
        boundaries = [int(per_epoch * e) for e in args.lr_decay_epochs]
        return flow.optimizer.PiecewiseScalingScheduler(base_lr, boundaries, args.lr_decay_rate, warmup=warmup)
    return flow.optimizer.PiecewiseScalingScheduler(base_lr, [], [], warmup=warmup)


def make_optimizer(args):
    scheduler = make_lr_scheduler(args)
    clipping = flow.optimizer.grad_clipping.by_global_norm(1.0) if args.grad_clipping else None
    if args.optimizer == "sgd":
        return flow.optimizer.SGD(scheduler, momentum=args.momentum, grad_clipping=clipping)
    return flow.optimizer.Adam(scheduler, grad_clipping=clipping)
