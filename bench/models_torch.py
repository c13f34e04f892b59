"""The benchmark workloads in PyTorch eager (CPU): the reference side of the comparison."""
from __future__ import annotations

from typing import Callable

import numpy as np

from big_torch import BIG, synchronizer


def build(workload: str, batch: int, seed: int = 0, device: str = "cpu", big_batch: int | None = None
          ) -> tuple[Callable[[], object], Callable[[], None]]:
    """(first_call, step) for a workload on ``device`` (``cpu`` or ``cuda``); inputs are fixed pixel-like
    batches; ``big_batch`` overrides ResNet-50's batch."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    if workload in BIG:
        return BIG[workload](rng, device, *(() if big_batch is None else (big_batch,)))
    images = torch.from_numpy(rng.random((batch, 1, 28, 28), dtype=np.float32)).to(device)
    labels = torch.from_numpy(rng.integers(0, 10, batch).astype(np.int64)).to(device)
    sync = synchronizer(device)

    if workload.startswith("mlp"):
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
    else:
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Flatten(), torch.nn.Linear(3136, 512), torch.nn.ReLU(), torch.nn.Dropout(0.5),
            torch.nn.Linear(512, 10))
    model = model.to(device)
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
            torch.nn.init.kaiming_normal_(module.weight)
            torch.nn.init.zeros_(module.bias)

    if workload.endswith("train") or workload == "lenet_epoch":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
            sync()
    else:
        model.eval()

        def step() -> None:
            with torch.no_grad():
                model(images)
            sync()

    return step, step
