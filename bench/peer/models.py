"""PyTorch twins of memfit's zoo models (src/models/), for bench/peer/.

Each model computes what memfit's model of the same name computes, layer by
layer and in the same order, and names its parameters as memfit does, so that
weights move between the two by name alone (memfit_name() maps the one
exception, nn.LSTM's per-layer suffix). Initialization does not matter: the
cross-check copies weights, and the timing runs only need sane values.

Every model is also a list of blocks, `model.blocks`, that applied in turn map
the data input to the logits (N*T or N rows, classes columns); the
checkpointing variant of the benchmark cuts this list into sqrt(n) segments.
"""

import math
import re

import torch
import torch.nn.functional as F
from torch import nn


def memfit_name(torch_name):
    """The memfit name of a PyTorch parameter or buffer name."""
    return re.sub(r"_l0$", "", torch_name)  # lstm.l0.weight_ih_l0 -> lstm.l0.weight_ih


def dropout(x, p, training):
    return F.dropout(x, p, training) if p > 0 else x


class LeNet(nn.Module):
    """memfit's lenet (zoo.cpp): conv 5x5 (20), pool, conv 5x5 (50), pool, 500, classes."""

    def __init__(self, image_size=28, classes=10, **_):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        side = ((image_size - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(50 * side * side, 500)
        self.fc2 = nn.Linear(500, classes)
        self.blocks = [
            lambda x: F.max_pool2d(F.relu(self.conv1(x)), 2, 2),
            lambda x: F.max_pool2d(F.relu(self.conv2(x)), 2, 2),
            lambda x: F.relu(self.fc1(torch.flatten(x, 1))),
            self.fc2,
        ]


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = _downsample(inplanes, planes, stride)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class Bottleneck(nn.Module):
    """torchvision's v1.5 bottleneck: the stride on the 3x3 convolution."""

    expansion = 4

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, 4 * planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * planes)
        self.downsample = _downsample(inplanes, 4 * planes, stride)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


def _downsample(inplanes, out_channels, stride):
    if stride == 1 and inplanes == out_channels:
        return None
    return nn.Sequential(nn.Conv2d(inplanes, out_channels, 1, stride, bias=False),
                         nn.BatchNorm2d(out_channels))


RESNETS = {"resnet18": (BasicBlock, [2, 2, 2, 2]), "resnet34": (BasicBlock, [3, 4, 6, 3]),
           "resnet50": (Bottleneck, [3, 4, 6, 3]), "resnet101": (Bottleneck, [3, 4, 23, 3]),
           "resnet152": (Bottleneck, [3, 8, 36, 3])}


class ResNet(nn.Module):
    """torchvision's resnet18..152 (memfit's resnet.cpp), with torchvision's names."""

    def __init__(self, name, classes=1000, width=64, **_):
        super().__init__()
        block, counts = RESNETS[name]
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        inplanes = width
        for stage, count in enumerate(counts):
            planes = width << stage
            layers = []
            for i in range(count):
                layers.append(block(inplanes, planes, 2 if stage > 0 and i == 0 else 1))
                inplanes = planes * block.expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.fc = nn.Linear(inplanes, classes)
        self.blocks = [lambda x: F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)]
        for stage in range(len(counts)):
            self.blocks += list(getattr(self, f"layer{stage + 1}"))
        self.blocks.append(lambda x: self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


class LstmLm(nn.Module):
    """memfit's lstm-lm (lstm.cpp): embedding, LSTM layers with dropout 0.2
    between and around them, a decoder to the vocabulary."""

    def __init__(self, depth=2, width=650, vocab=10000, p=0.2, **_):
        super().__init__()
        self.p = p
        self.embedding = nn.Embedding(vocab, width)
        # One nn.LSTM per layer, so that each layer is a block of its own;
        # named lstm.l<i> (memfit_name drops nn.LSTM's _l0 suffix).
        self.lstm = nn.ModuleDict({f"l{i}": nn.LSTM(width, width, 1, batch_first=True)
                                   for i in range(depth)})
        self.decoder = nn.Linear(width, vocab)
        self.blocks = [lambda t: dropout(self.embedding(t), self.p, self.training)]
        for i in range(depth):
            self.blocks.append(self._layer(i))
        self.blocks.append(
            lambda x: self.decoder(dropout(x, self.p, self.training).reshape(-1, x.shape[-1])))

    def _layer(self, i):
        lstm = self.lstm[f"l{i}"]
        if i == 0:
            return lambda x: lstm(x)[0]
        return lambda x: lstm(dropout(x, self.p, self.training))[0]


class GptBlock(nn.Module):
    """Pre-layer-norm block: x + drop(attn(ln_1(x))), then x + drop(mlp(ln_2(x)))."""

    def __init__(self, width, heads, p, attention):
        super().__init__()
        self.heads, self.p, self.sdpa = heads, p, attention == "sdpa"
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(width, 3 * width)
        self.attn.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(width, 4 * width)
        self.mlp.c_proj = nn.Linear(4 * width, width)

    def attention(self, x, n, t):
        # x (N*T, W) -> q, k, v (N, heads, T, dh); scores (N, heads, T, T), as
        # memfit's naive form materializes them, or PyTorch's fused
        # scaled_dot_product_attention (attention="sdpa", memfit's fused form).
        w = x.shape[1]
        dh = w // self.heads
        q, k, v = (z.reshape(n, t, self.heads, dh).transpose(1, 2)
                   for z in self.attn.c_attn(x).split(w, dim=1))
        if self.sdpa:
            out = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
            return self.attn.c_proj(out.transpose(1, 2).reshape(n * t, w))
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(dh))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, -1e9)  # memfit's causal_mask value
        weights = dropout(torch.softmax(scores, dim=3), self.p, self.training)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(n * t, w)
        return self.attn.c_proj(out)

    def forward(self, x, n, t):
        x = x + dropout(self.attention(self.ln_1(x), n, t), self.p, self.training)
        h = F.gelu(self.mlp.c_fc(self.ln_2(x)))  # exact GELU
        return x + dropout(self.mlp.c_proj(h), self.p, self.training)


class Gpt(nn.Module):
    """memfit's gpt (transformer.cpp): GPT-2 with learned positions, pre-LN
    blocks, exact GELU, dropout 0.1 and the embedding tied to the output."""

    def __init__(self, depth=12, width=768, seq_len=1024, vocab=50257, p=0.1, attention="naive",
                 **_):
        super().__init__()
        heads = max(1, width // 64)
        self.p, self.t = p, seq_len
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq_len, width)  # the positions table (T, W)
        self.h = nn.ModuleList([GptBlock(width, heads, p, attention) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(width)
        self.blocks = [self._embed]
        for block in self.h:
            self.blocks.append(self._block(block))
        self.blocks.append(lambda x: torch.matmul(self.ln_f(x), self.wte.weight.t()))

    def _embed(self, tokens):
        n, t = tokens.shape
        x = dropout(self.wte(tokens) + self.wpe.weight, self.p, self.training)
        return x.reshape(n * t, -1)

    def _block(self, block):
        def run(x):
            return block(x, x.shape[0] // self.t, self.t)
        return run


def build(name, **sizes):
    """The twin of memfit's `name` at the given sizes (memfit's option names)."""
    if name == "lenet":
        return LeNet(**sizes)
    if name in RESNETS:
        return ResNet(name, **sizes)
    if name == "lstm-lm":
        return LstmLm(**sizes)
    if name == "gpt":
        return Gpt(**sizes)
    raise ValueError(f"bench/peer has no PyTorch twin of '{name}' "
                     "(lenet, resnet18..152, lstm-lm, gpt)")


class Whole(nn.Module):
    """The blocks of `model` in turn, with the mean cross-entropy against
    `labels` flattened as memfit flattens them: one module to compile."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, labels):
        for block in self.model.blocks:
            x = block(x)
        return F.cross_entropy(x, labels.reshape(-1))
