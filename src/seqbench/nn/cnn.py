"""A small convolutional network: the baseline the Vision Transformer is compared with.

    image (B, C, H, W)
      -> block 1: [3x3 conv -> BatchNorm -> ReLU] x convs_per_block -> 2x2 max-pool  (B, w1, H/2, W/2)
      -> block 2: the same with w2 channels                                          (B, w2, H/4, W/4)
      -> ... one block per entry of `widths`
      -> flatten -> dropout -> Linear(hidden) -> ReLU -> dropout -> Linear(classes)

The VGG pattern (Simonyan & Zisserman 2015) at MNIST scale, with batch normalisation (Ioffe &
Szegedy 2015) after every convolution so Adam trains it quickly at a high learning rate.
Convolutions carry no bias (BatchNorm's shift replaces it).
"""

from __future__ import annotations

from torch import Tensor, nn


class SmallCNN(nn.Module):
    def __init__(self, channels: int, height: int, width: int, num_classes: int,
                 widths: tuple[int, ...] = (32, 64), convs_per_block: int = 2, hidden: int = 128,
                 dropout: float = 0.25) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = channels
        for c_out in widths:
            for _ in range(convs_per_block):
                layers += [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
                c_in = c_out
            layers.append(nn.MaxPool2d(2))
            height, width = height // 2, width // 2
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Dropout(dropout), nn.Linear(c_in * height * width, hidden), nn.ReLU(inplace=True),
            nn.Dropout(dropout), nn.Linear(hidden, num_classes),
        )

    def forward(self, images: Tensor) -> Tensor:
        return self.classifier(self.features(images))  # (B, C, H, W) -> (B, w, H', W') -> (B, classes)
