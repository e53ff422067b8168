"""Small PyTorch models with random weights for the importer tests."""

# ruff: noqa
import torch, torch.nn as nn, torch.nn.functional as F


class MLP(nn.Module):
    def __init__(s):
        super().__init__()
        s.a = nn.Linear(16, 32)
        s.b = nn.Linear(32, 8)

    def forward(s, x):
        return s.b(F.gelu(s.a(x)))


class GPT2Block(nn.Module):
    def __init__(s, d=32, h=4):
        super().__init__()
        s.h = h
        s.ln1 = nn.LayerNorm(d)
        s.ln2 = nn.LayerNorm(d)
        s.qkv = nn.Linear(d, 3 * d)
        s.proj = nn.Linear(d, d)
        s.fc = nn.Linear(d, 4 * d)
        s.fc2 = nn.Linear(4 * d, d)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q = q.view(B, T, s.h, C // s.h).transpose(1, 2)
        k = k.view(B, T, s.h, C // s.h).transpose(1, 2)
        v = v.view(B, T, s.h, C // s.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + s.proj(y)
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))


class RMSNorm(nn.Module):
    def __init__(s, d):
        super().__init__()
        s.w = nn.Parameter(torch.rand(d) + 0.5)

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s.w


def rot(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(s, d=32, h=4, kv=2, maxlen=64, ff=64):
        super().__init__()
        s.h = h
        s.kv = kv
        s.hd = d // h
        s.q = nn.Linear(d, d, bias=False)
        s.k = nn.Linear(d, kv * s.hd, bias=False)
        s.v = nn.Linear(d, kv * s.hd, bias=False)
        s.o = nn.Linear(d, d, bias=False)
        s.n1 = RMSNorm(d)
        s.n2 = RMSNorm(d)
        s.g = nn.Linear(d, ff, bias=False)
        s.u = nn.Linear(d, ff, bias=False)
        s.dn = nn.Linear(ff, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, s.hd, 2).float() / s.hd))
        t = torch.arange(maxlen).float()
        f = torch.outer(t, inv)
        e = torch.cat((f, f), -1)
        s.register_buffer("cos", e.cos())
        s.register_buffer("sin", e.sin())

    def forward(s, x):
        B, T, C = x.shape
        h = s.n1(x)
        q = s.q(h).view(B, T, s.h, s.hd).transpose(1, 2)
        k = s.k(h).view(B, T, s.kv, s.hd).transpose(1, 2)
        v = s.v(h).view(B, T, s.kv, s.hd).transpose(1, 2)
        cos = s.cos[:T]
        sin = s.sin[:T]
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        k = k.repeat_interleave(s.h // s.kv, dim=1)
        v = v.repeat_interleave(s.h // s.kv, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + s.o(y)
        h = s.n2(x)
        return x + s.dn(F.silu(s.g(h)) * s.u(h))


class BertLayer(nn.Module):
    def __init__(s, d=32, h=4, ff=64):
        super().__init__()
        s.h = h
        s.qkv = nn.Linear(d, 3 * d)
        s.o = nn.Linear(d, d)
        s.ln1 = nn.LayerNorm(d, eps=1e-12)
        s.ln2 = nn.LayerNorm(d, eps=1e-12)
        s.f1 = nn.Linear(d, ff)
        s.f2 = nn.Linear(ff, d)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in s.qkv(x).split(C, dim=2))
        a = torch.softmax(q @ k.transpose(-1, -2) / (C // s.h) ** 0.5, dim=-1) @ v
        x = s.ln1(x + s.o(a.transpose(1, 2).reshape(B, T, C)))
        return s.ln2(x + s.f2(F.gelu(s.f1(x))))


class ConvNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 8, 3, padding=1)
        s.b1 = nn.BatchNorm2d(8)
        s.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        s.b2 = nn.BatchNorm2d(16)
        s.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        s.fc = nn.Linear(16, 10)

    def forward(s, x):
        x = F.relu(s.b1(s.c1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu6(s.b2(s.c2(x)))
        x = x + s.dw(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return s.fc(x)


class BertMHALayer(nn.Module):
    """A BERT-base-style post-norm layer on nn.MultiheadAttention (sequence-first layout)."""

    def __init__(s, d=32, h=4, ff=64):
        super().__init__()
        s.att = nn.MultiheadAttention(d, h)
        s.ln1 = nn.LayerNorm(d, eps=1e-12)
        s.ln2 = nn.LayerNorm(d, eps=1e-12)
        s.f1 = nn.Linear(d, ff)
        s.f2 = nn.Linear(ff, d)

    def forward(s, x):  # x: (L, N, E)
        a, _ = s.att(x, x, x, need_weights=False)
        x = s.ln1(x + a)
        return s.ln2(x + s.f2(F.gelu(s.f1(x))))


class ViTBlock(nn.Module):
    """A ViT-B/16-style pre-norm encoder block (batch-first attention) at reduced width."""

    def __init__(s, d=32, h=4, ff=64):
        super().__init__()
        s.ln1 = nn.LayerNorm(d, eps=1e-6)
        s.att = nn.MultiheadAttention(d, h, batch_first=True)
        s.ln2 = nn.LayerNorm(d, eps=1e-6)
        s.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(s, x):  # x: (N, L, E)
        h = s.ln1(x)
        x = x + s.att(h, h, h, need_weights=False)[0]
        return x + s.mlp(s.ln2(x))


class ViTPatchBlock(nn.Module):
    """Patch embedding (conv 16x16 stride 16), class token, position embedding, one block."""

    def __init__(s, d=32, image=32, patch=16, h=4, ff=64):
        super().__init__()
        n = (image // patch) ** 2
        s.embed = nn.Conv2d(3, d, patch, stride=patch)
        s.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        s.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        s.block = ViTBlock(d, h, ff)
        s.ln = nn.LayerNorm(d, eps=1e-6)
        s.head = nn.Linear(d, 10)

    def forward(s, x):
        x = s.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], dim=1) + s.pos
        return s.head(s.ln(s.block(x))[:, 0])


class BasicBlock(nn.Module):
    """ResNet-18's BasicBlock; with ``stride=2`` the downsampling one (1x1 conv shortcut)."""

    def __init__(s, cin, cout, stride=1):
        super().__init__()
        s.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        s.b1 = nn.BatchNorm2d(cout)
        s.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        s.b2 = nn.BatchNorm2d(cout)
        s.down = None
        if stride != 1 or cin != cout:
            s.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(s, x):
        y = F.relu(s.b1(s.c1(x)))
        y = s.b2(s.c2(y))
        return F.relu(y + (x if s.down is None else s.down(x)))


class ResNetStem(nn.Module):
    """ResNet-18's stem, one plain and one downsampling block, and its head, at small width."""

    def __init__(s, w=8, classes=10):
        super().__init__()
        s.conv = nn.Conv2d(3, w, 7, 2, 3, bias=False)
        s.bn = nn.BatchNorm2d(w)
        s.l1 = BasicBlock(w, w)
        s.l2 = BasicBlock(w, 2 * w, stride=2)
        s.fc = nn.Linear(2 * w, classes)

    def forward(s, x):
        x = F.max_pool2d(F.relu(s.bn(s.conv(x))), 3, 2, 1)
        x = s.l2(s.l1(x))
        return s.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's inverted residual: 1x1 expand, 3x3 depthwise, 1x1 linear projection."""

    def __init__(s, cin, cout, stride, expand):
        super().__init__()
        hid = cin * expand
        s.res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6()]
        layers += [
            nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False),
            nn.BatchNorm2d(hid),
            nn.ReLU6(),
            nn.Conv2d(hid, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        s.conv = nn.Sequential(*layers)

    def forward(s, x):
        return x + s.conv(x) if s.res else s.conv(x)


class MobileNetV2Blocks(nn.Module):
    """MobileNetV2's stem, inverted residuals (t=1, strided, residual), head, at small width."""

    def __init__(s, classes=10):
        super().__init__()
        s.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        s.blocks = nn.Sequential(
            InvertedResidual(8, 8, 1, 1),
            InvertedResidual(8, 12, 2, 6),
            InvertedResidual(12, 12, 1, 6),
        )
        s.head = nn.Sequential(nn.Conv2d(12, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6())
        s.fc = nn.Linear(32, classes)

    def forward(s, x):
        x = s.head(s.blocks(s.stem(x)))
        return s.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class LlamaDecode(nn.Module):
    """One Llama decoder block at decode: one new token against a KV cache of any length.

    RoPE at the cache's position, grouped-query attention (2 KV heads for 4 query heads),
    RMSNorm, SiLU-gated MLP; returns the output and the grown caches.
    """

    def __init__(s, d=32, h=4, kv=2, maxlen=64, ff=64):
        super().__init__()
        s.blk = LlamaBlock(d, h, kv, maxlen, ff)

    def forward(s, x, k_cache, v_cache):  # x: (B, 1, D); caches: (B, kv, P, hd)
        b = s.blk
        B, T, C = x.shape
        P = k_cache.shape[2]
        h = b.n1(x)
        q = b.q(h).view(B, T, b.h, b.hd).transpose(1, 2)
        k = b.k(h).view(B, T, b.kv, b.hd).transpose(1, 2)
        v = b.v(h).view(B, T, b.kv, b.hd).transpose(1, 2)
        cos, sin = b.cos[P : P + T], b.sin[P : P + T]
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        k_all = torch.cat([k_cache, k], dim=2)
        v_all = torch.cat([v_cache, v], dim=2)
        kk = k_all.repeat_interleave(b.h // b.kv, dim=1)
        vv = v_all.repeat_interleave(b.h // b.kv, dim=1)
        y = F.scaled_dot_product_attention(q, kk, vv).transpose(1, 2).reshape(B, T, C)
        x = x + b.o(y)
        h = b.n2(x)
        return x + b.dn(F.silu(b.g(h)) * b.u(h)), k_all, v_all


def randomize_batch_norms(model):
    """Running statistics that are not the identity, so the test sees them."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model


class LlamaDecodeKV(LlamaDecode):
    """LlamaDecode for a cache whose length is dynamic: the KV heads are repeated the way HF
    Llama's ``repeat_kv`` does (expand and reshape), which torch.export keeps symbolic in the
    cache length, where ``repeat_interleave`` adds a guard the export cannot prove."""

    def forward(s, x, k_cache, v_cache):  # x: (B, 1, D); caches: (B, kv, P, hd) -> P + 1
        b = s.blk
        B, T, C = x.shape
        P = k_cache.shape[2]
        h = b.n1(x)
        q = b.q(h).view(B, T, b.h, b.hd).transpose(1, 2)
        k = b.k(h).view(B, T, b.kv, b.hd).transpose(1, 2)
        v = b.v(h).view(B, T, b.kv, b.hd).transpose(1, 2)
        cos, sin = b.cos[P : P + T], b.sin[P : P + T]
        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        # contiguous new entries: cat then needs no stride comparison with the cache's
        k_all = torch.cat([k_cache, k.contiguous()], dim=2)
        v_all = torch.cat([v_cache, v.contiguous()], dim=2)
        rep = b.h // b.kv

        def repeat_kv(t):
            n = t.shape[2]
            return t[:, :, None].expand(B, b.kv, rep, n, b.hd).reshape(B, b.h, n, b.hd)

        y = F.scaled_dot_product_attention(q, repeat_kv(k_all), repeat_kv(v_all))
        x = x + b.o(y.transpose(1, 2).reshape(B, T, C))
        h = b.n2(x)
        return x + b.dn(F.silu(b.g(h)) * b.u(h)), k_all, v_all


class ResNet18(nn.Module):
    """torchvision's ResNet-18 (layers [2, 2, 2, 2] of BasicBlock, widths 64 to 512)."""

    def __init__(s, classes=1000, w=64):
        super().__init__()
        s.conv = nn.Conv2d(3, w, 7, 2, 3, bias=False)
        s.bn = nn.BatchNorm2d(w)
        stages, cin = [], w
        for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
            stride = 1 if i == 0 else 2
            stages += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout)]
            cin = cout
        s.layers = nn.Sequential(*stages)
        s.fc = nn.Linear(cin, classes)

    def forward(s, x):
        x = F.max_pool2d(F.relu(s.bn(s.conv(x))), 3, 2, 1)
        x = s.layers(x)
        return s.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class MobileNetV2(nn.Module):
    """torchvision's MobileNetV2 (width 1.0): its 17 inverted residuals, 1280-wide head."""

    SETTINGS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )  # (expand t, channels c, repeats n, stride s)

    def __init__(s, classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        cin = 32
        for t, c, n, stride in s.SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, stride if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        s.features = nn.Sequential(*layers)
        s.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(s, x):
        x = F.adaptive_avg_pool2d(s.features(x), 1).flatten(1)
        return s.classifier(x)
