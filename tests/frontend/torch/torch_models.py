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
    def __init__(s, d=32, h=4, kv=2, maxlen=64):
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
        s.g = nn.Linear(d, 64, bias=False)
        s.u = nn.Linear(d, 64, bias=False)
        s.dn = nn.Linear(64, d, bias=False)
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
    def __init__(s, d=32, h=4):
        super().__init__()
        s.h = h
        s.qkv = nn.Linear(d, 3 * d)
        s.o = nn.Linear(d, d)
        s.ln1 = nn.LayerNorm(d, eps=1e-12)
        s.ln2 = nn.LayerNorm(d, eps=1e-12)
        s.f1 = nn.Linear(d, 64)
        s.f2 = nn.Linear(64, d)

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
