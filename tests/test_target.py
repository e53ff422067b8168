"""CPU targets that describe a machine: options, presets, str round trip, host detection, the
TILECRAFT_HOST_TARGET override; the CUDA default-arch message."""

from __future__ import annotations

import logging

import pytest

import tilecraft.target as target_mod
from tilecraft.target import (
    CPU_MODELS,
    CPU_PRESETS,
    GPU_PRESETS,
    X86_FEATURES,
    Target,
    TargetError,
)

V3 = ("avx", "avx2", "f16c", "fma", "sse4_2")
AVX512 = ("avx", "avx2", "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl", "f16c",
          "fma", "sse4_2")  # fmt: skip
HOST_CACHES = (48 << 10, 2 << 20, 64 << 20)


@pytest.fixture
def avx2_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 6-core x86 host with AVX2 and no AVX-512, whatever machine runs the test."""
    monkeypatch.delenv("TILECRAFT_HOST_TARGET", raising=False)
    monkeypatch.setattr(target_mod, "_host_arch", lambda: "x86_64")
    monkeypatch.setattr(target_mod, "_host_features", lambda: V3)
    monkeypatch.setattr(target_mod, "_host_cores", lambda: 6)
    monkeypatch.setattr(target_mod, "host_cache_sizes", lambda: HOST_CACHES)


@pytest.mark.parametrize(
    ("preset", "mcpu", "features", "bits", "flags"),
    [
        ("x86-64-v2", "x86-64-v2", ("sse4_2",), 128, ("-march=x86-64-v2",)),
        ("avx2", "x86-64-v3", V3, 256, ("-march=x86-64-v3",)),
        ("avx512", "skylake-avx512", AVX512, 512,
         ("-march=skylake-avx512", "-mprefer-vector-width=512")),
        ("aarch64", "armv8-a", ("neon",), 128, ("-march=armv8-a",)),
    ],
)  # fmt: skip
def test_cpu_presets_fix_the_isa_and_the_caches(
    avx2_host: None,
    preset: str,
    mcpu: str,
    features: tuple[str, ...],
    bits: int,
    flags: tuple[str, ...],
) -> None:
    t = Target(preset)
    assert (t.kind, t.mcpu, t.features, t.simd_bits, t.arch_flags) == (
        "cpu", mcpu, features, bits, flags)  # fmt: skip
    assert (t.l1d_bytes, t.l2_bytes, t.l3_bytes) == CPU_MODELS[mcpu].caches
    assert t.num_cores == 6  # the host's: a preset does not fix the core count
    assert t == Target(f"cpu -mcpu={mcpu}") == Target(f"cpu -mcpu={preset}")
    assert preset in Target.presets()
    assert t.arch == ("aarch64" if preset == "aarch64" else "x86_64")


def test_presets_lists_gpu_and_cpu_presets() -> None:
    assert Target.presets() == sorted({*GPU_PRESETS, *CPU_PRESETS})
    assert {"h100", "a100", "avx2", "avx512", "x86-64-v2", "aarch64"} <= set(Target.presets())


def test_the_host_fills_only_what_is_not_given(avx2_host: None) -> None:
    host = Target("cpu")
    assert (host.mcpu, host.features, host.num_cores) == ("native", V3, 6)
    assert (host.l1d_bytes, host.l2_bytes, host.l3_bytes) == HOST_CACHES
    assert host.arch_flags == ("-march=native",)
    cores = Target("cpu -num-cores=3")
    assert (cores.features, cores.num_cores, cores.l2_bytes) == (V3, 3, 2 << 20)
    # -mattr alone: the features start from the x86-64 baseline, not from the host's
    attrs = Target("cpu -mattr=+avx2,+fma")
    assert (attrs.mcpu, attrs.features, attrs.simd_bits) == ("x86-64", ("avx2", "fma"), 256)
    assert (attrs.num_cores, attrs.l3_bytes) == (6, 64 << 20)
    assert attrs.arch_flags == ("-march=x86-64", "-mavx2", "-mfma")
    # -mcpu=native -mattr: the host's features changed by the named ones
    fewer = Target("cpu -mcpu=native -mattr=-fma,-f16c")
    assert fewer.features == ("avx", "avx2", "sse4_2")
    assert fewer.arch_flags == ("-march=native", "-mno-fma", "-mno-f16c")
    caches = Target("avx2 -l1d-bytes=48K -l2-bytes=1048576 -num-cores=16")
    assert (caches.l1d_bytes, caches.l2_bytes, caches.l3_bytes) == (48 << 10, 1 << 20, 32 << 20)
    assert caches.num_cores == 16


def test_the_host_arch_flags_prefer_512_bit_vectors_with_avx512(
    avx2_host: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(target_mod, "_host_features", lambda: AVX512)
    assert Target("cpu").arch_flags == ("-march=native", "-mprefer-vector-width=512")
    assert Target("cpu").simd_bits == 512
    no512 = Target("cpu -mcpu=native -mattr=-avx512f")
    assert no512.arch_flags == ("-march=native", "-mno-avx512f")
    assert no512.simd_bits == 256
    assert Target("avx512 -mattr=-avx512f").arch_flags == ("-march=skylake-avx512", "-mno-avx512f")
    assert Target("avx2 -mattr=+avx512f").arch_flags == (
        "-march=x86-64-v3", "-mavx512f", "-mprefer-vector-width=512")  # fmt: skip
    assert Target("aarch64 -mattr=+sve,-neon").arch_flags == ("-march=armv8-a+sve+nosimd",)


@pytest.mark.parametrize(
    "spec",
    [
        "cpu", "c", "llvm", "x86-64-v2", "avx2", "avx512", "aarch64",
        "cpu -mcpu=native", "cpu -mcpu=native -mattr=-avx2", "cpu -mattr=+sse4.2",
        "cpu -mcpu=skylake-avx512 -mattr=-avx512bw -num-cores=7 -l3-bytes=16M",
        "aarch64 -mattr=+sve -l1d-bytes=65536", "cpu -mcpu=x86-64 -num-cores=1",
        "cuda", "cuda -arch=sm_75", *sorted(GPU_PRESETS),
    ],
)  # fmt: skip
def test_str_round_trips(avx2_host: None, spec: str) -> None:
    t = Target(spec)
    again = Target(str(t))
    assert again == t
    assert str(again) == str(t)
    assert hash(again) == hash(t)
    assert again.arch_flags == t.arch_flags


def test_str_states_the_whole_machine(avx2_host: None) -> None:
    assert str(Target("cpu")) == (
        "cpu -mcpu=native -mattr=+sse4.2,+avx,+avx2,+fma,+f16c,-avx512f,-avx512bw,-avx512vl,"
        "-avx512dq,-avx512cd -num-cores=6 -l1d-bytes=49152 -l2-bytes=2097152 -l3-bytes=67108864"
    )
    assert str(Target("avx2")) == "cpu -mcpu=x86-64-v3 -num-cores=6"
    assert str(Target("avx512 -mattr=-avx512cd -l2-bytes=2M")) == (
        "cpu -mcpu=skylake-avx512 -mattr=-avx512cd -num-cores=6 -l2-bytes=2097152"
    )
    assert str(Target("h100")) == str(Target("cuda")) == "cuda -arch=sm_90"
    assert str(Target("rtx4090")) == "rtx4090"  # sm_89 alone means the L4's limits


def test_a_host_string_read_on_another_host_keeps_its_features(
    avx2_host: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = str(Target("cpu"))
    monkeypatch.setattr(target_mod, "_host_features", lambda: AVX512)
    monkeypatch.setattr(target_mod, "_host_cores", lambda: 64)
    logged = Target(line)
    assert (logged.features, logged.num_cores, logged.simd_bits) == (V3, 6, 256)
    assert logged != Target("cpu")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cpu -march=native", r"unknown option -march; accepted here: -mcpu, -mattr, -num-cores"),
        ("avx2 -vector-bits=256", r"unknown option -vector-bits; .*-l3-bytes"),
        ("cuda -mcpu=sm_90", r"unknown option -mcpu; accepted here: -arch$"),
        ("cuda -arch=sm_80 -num-cores=4", r"unknown option -num-cores; accepted here: -arch"),
        ("cpu -mcpu=znver3", r"unknown -mcpu=znver3; accepted: native, aarch64, armv8-a, avx2"),
        ("cpu -mattr=+avx2,+avx1024", r"unknown x86_64 feature 'avx1024' in -mattr; known: sse4.2"),
        ("cpu -mattr=avx2", r"-mattr items look like \+avx2 or -avx512f, got 'avx2'"),
        ("aarch64 -mattr=+avx2", r"unknown aarch64 feature 'avx2' in -mattr; known: neon, sve"),
        ("avx2 -mcpu=x86-64-v2", r"the preset 'avx2' already sets -mcpu"),
        ("cpu -num-cores=0", r"-num-cores must be a positive integer, got '0'"),
        ("cpu -num-cores=4K", r"-num-cores must be a positive integer"),
        ("cpu -l2-bytes=big", r"-l2-bytes must be a positive integer, got 'big'"),
        ("cpu -num-cores=2 -num-cores=4", r"-num-cores must be given once"),
        ("cpu -mattr=", r"-mattr must be given once, with a value"),
        ("cpu avx2", r"options look like -key=value, got 'avx2'"),
        ("h100 -arch=sm_80", r"the preset 'h100' is -arch=sm_90"),
        ("tpu", r"unknown target 'tpu'.*avx2.*h100"),
    ],
)  # fmt: skip
def test_unknown_or_malformed_options_are_errors(avx2_host: None, spec: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        Target(spec)


def test_missing_host_features(avx2_host: None) -> None:
    assert Target("cpu").missing_host_features() == ()
    assert Target("cpu -mcpu=native").missing_host_features() == ()
    assert Target("avx2").missing_host_features() == ()
    assert Target("x86-64-v2").missing_host_features() == ()
    assert Target("avx512").missing_host_features() == (
        "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")  # fmt: skip
    assert Target("aarch64").missing_host_features() == ("aarch64", "neon")
    assert Target("cuda").missing_host_features() == ()


def test_host_target_override_gives_the_host_a_presets_isa(
    avx2_host: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(target_mod, "_host_features", lambda: AVX512)
    monkeypatch.setenv("TILECRAFT_HOST_TARGET", "avx2")
    host = Target("cpu")
    assert (host.mcpu, host.features, host.simd_bits) == ("x86-64-v3", V3, 256)
    assert (host.num_cores, host.l1d_bytes, host.l2_bytes, host.l3_bytes) == (6, *HOST_CACHES)
    assert host.arch_flags == ("-march=x86-64-v3",)
    assert host.missing_host_features() == ()
    assert Target(str(host)) == host
    assert Target("cpu -mcpu=native").features == AVX512  # native stays the real machine
    monkeypatch.setenv("TILECRAFT_HOST_TARGET", "skylake-avx512")
    assert Target("cpu").simd_bits == 512
    monkeypatch.setenv("TILECRAFT_HOST_TARGET", "avx3")
    with pytest.raises(TargetError, match=r"TILECRAFT_HOST_TARGET='avx3': expected a CPU preset"):
        Target("cpu")


def test_an_avx512_override_on_an_avx2_host_is_seen_as_missing(
    avx2_host: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILECRAFT_HOST_TARGET", "avx512")
    assert Target("cpu").missing_host_features() == (
        "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")  # fmt: skip


def test_targets_are_equal_when_they_describe_the_same_machine(avx2_host: None) -> None:
    assert Target("avx2") == Target("cpu -mcpu=x86-64-v3 -num-cores=6")
    assert Target("avx2") != Target("avx2 -num-cores=2")
    assert Target("cpu") == Target("cpu -mcpu=native")
    assert Target("cpu") != Target("avx2")  # same features, but -march=native is not x86-64-v3
    assert Target("cpu -mattr=+sse4.2") != Target("x86-64-v2")
    assert len({Target("avx2"), Target("cpu -mcpu=avx2"), Target("cpu -mcpu=x86-64-v3")}) == 1


def test_feature_names_accept_llvm_and_cpuinfo_spellings(avx2_host: None) -> None:
    assert Target("cpu -mattr=+sse4.2").features == Target("cpu -mattr=+sse4_2").features
    assert Target("aarch64 -mattr=-asimd").features == ()
    assert set(X86_FEATURES) >= set(AVX512)


def test_cuda_without_arch_logs_the_arch_it_chose(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tilecraft"):
        t = Target("cuda")
    assert t.arch == "sm_90"
    assert t.gpu == GPU_PRESETS["h100"]
    [record] = [r for r in caplog.records if r.name == "tilecraft"]
    assert record.levelno == logging.INFO
    assert "chose sm_90" in record.getMessage()
    assert "cuda -arch=sm_XY" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tilecraft"):
        Target("cuda -arch=sm_80")
        Target("a100")
    assert not [r for r in caplog.records if r.name == "tilecraft"]
