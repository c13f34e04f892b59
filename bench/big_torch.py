"""The torch twins of big_flowjob.py: ResNet-50 (bottleneck v1.5) and the small BERT, same shapes."""
from __future__ import annotations

from typing import Callable

import numpy as np

from big_flowjob import BERT, BERT_BATCH, RESNET_BATCH, RESNET_STAGES


def synchronizer(device: str) -> Callable[[], None]:
    """A step on a GPU ends when its kernels have run (flowjob's returns its loss to the host)."""
    import torch
    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def resnet50_train(rng: np.random.Generator, device: str = "cpu", batch: int = RESNET_BATCH
                   ) -> tuple[Callable[[], object], Callable[[], None]]:
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    def conv_bn(cin: int, cout: int, k: int, s: int, relu: bool = True) -> nn.Sequential:
        layers = [nn.Conv2d(cin, cout, k, s, padding=k // 2, bias=False), nn.BatchNorm2d(cout, momentum=0.1)]
        return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)

    class Block(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(conv_bn(cin, width, 1, 1), conv_bn(width, width, 3, stride),
                                      conv_bn(width, width * 4, 1, 1, relu=False))
            self.proj = conv_bn(cin, width * 4, 1, stride, relu=False) if cin != width * 4 or stride != 1 else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.body(x) + (self.proj(x) if self.proj is not None else x))

    layers: list[nn.Module] = [conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, padding=1)]
    cin = 64
    for stage, (width, blocks) in enumerate(RESNET_STAGES):
        for i in range(blocks):
            layers.append(Block(cin, width, 2 if i == 0 and stage > 0 else 1))
            cin = width * 4
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)).train().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.from_numpy(rng.random((batch, 3, 224, 224), dtype=np.float32)).to(device)
    labels = torch.from_numpy(rng.integers(0, 1000, batch)).to(device)
    sync = synchronizer(device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(images), labels).backward()
        opt.step()
        sync()
    return step, step


def bert_train(rng: np.random.Generator, device: str = "cpu") -> tuple[Callable[[], object], Callable[[], None]]:
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    seq, hidden, vocab, preds, batch = BERT["seq"], BERT["hidden"], BERT["vocab"], BERT["predictions"], BERT_BATCH

    class Bert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(vocab, hidden)
            self.pos = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
            self.ln = nn.LayerNorm(hidden)
            layer = nn.TransformerEncoderLayer(hidden, BERT["heads"], BERT["ffn"], dropout=0.0,
                                               activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, BERT["layers"], enable_nested_tensor=False)
            self.transform = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
            self.pooler = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 2))

        def forward(self, tokens: torch.Tensor, positions: torch.Tensor, mlm: torch.Tensor,
                    nsp: torch.Tensor) -> torch.Tensor:
            x = self.encoder(self.ln(self.words(tokens) + self.pos))
            picked = self.transform(x.reshape(-1, hidden)[positions.reshape(-1)])
            mlm_loss = F.cross_entropy(picked @ self.words.weight.T, mlm.reshape(-1))
            return mlm_loss + F.cross_entropy(self.pooler(x[:, 0]), nsp)

    model = Bert().train().to(device)
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "norm" in n or n.startswith("ln")]
    decay = [p for p in model.parameters() if all(p is not q for q in no_decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4)
    tokens = torch.from_numpy(rng.integers(0, vocab, (batch, seq))).to(device)
    positions = torch.from_numpy(np.arange(batch)[:, None] * seq + rng.integers(0, seq, (batch, preds))).to(device)
    mlm = torch.from_numpy(rng.integers(0, vocab, (batch, preds))).to(device)
    nsp = torch.from_numpy(rng.integers(0, 2, batch)).to(device)
    sync = synchronizer(device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(tokens, positions, mlm, nsp).backward()
        opt.step()
        sync()
    return step, step


BIG = {"resnet50_train": resnet50_train, "bert_train": bert_train}
