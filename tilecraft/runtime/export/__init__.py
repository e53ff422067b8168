"""Deployable libraries: one file holding a compiled model, loaded with no compiler.

``exe.export_library(path)`` writes, and ``tc.runtime.load_module(path)`` reads, a zip file
(format ``tilecraft.library``, version :data:`VERSION`) holding:

``manifest.json``
    ``format``, ``version`` (``"major.minor"``), ``tilecraft_version``; ``target``: its
    string, ``kind`` (``"cpu"``/``"cuda"``), ``arch`` (``x86_64``, ``aarch64``, ``sm_90``...)
    and the CPU ``features`` the code needs; ``library``: the backend kind and the members
    below; ``kernels``: per kernel its symbol, the binary holding it and that binary's
    sha256, the structural hashes of the function as scheduled and as lowered, and who
    scheduled it (``tc.scheduled``: ``rule:<Name>``, ``database``, ...; ``record``: the
    database record where the function names one); ``functions``: per graph function its
    program, its constants' members and its native entry (symbol and context layout: extents,
    constants, steps, results);
    ``params_bound``; ``files``: the sha256 of every other member.
``kernels/library.so`` (CPU) or ``kernels/library.cubin`` (CUDA)
    The compiled kernels; a CPU library also holds each graph function's native entry.
``kernels/artifact.json``
    The backend's :class:`~tilecraft.runtime.Artifact` without its bytes: source, symbols and
    the lowered program (``tc.ir`` JSON), so loading lowers and emits nothing.
``graph/<function>.json``
    The graph program (:mod:`tilecraft.lower.graph_program_json`), symbolic shapes included.
``params/<function>/<i>.npy``
    The constants of the program (the parameters bound at compile time and what was folded
    from them), read with ``allow_pickle=False``; stored uncompressed (the other members are
    deflated).
``include/tilecraft_model.h`` (CPU libraries, format 1.2)
    The documented header of the plain C entries (:mod:`tilecraft.codegen.graph_c_abi`): per
    graph function ``tc_<name>(inputs, n_inputs, outputs, n_outputs, workspace)`` (one output
    per result of a function returning a tuple),
    ``tc_<name>_workspace_size`` and ``tc_<name>_output_shape`` over ``tc_tensor`` (data
    pointer, shape pointer, ndim, dtype code), and ``tc_load_weights(dir)``, which reads the
    ``params/`` members of the library unpacked into ``dir`` (``unzip``, or
    :func:`extract_c`); the manifest's ``c_header`` names it and each function's ``c_entry``
    its symbols, or ``c_refused`` why it has none (a race-checked or bounds-checked build).
    ``DispatchLibrary``'s BLAS steps call cblas routines that ``tc_load_blas(path)`` finds
    (``dlopen``; NULL: ``$TILECRAFT_BLAS_LIBRARY``, else the scipy-openblas32 wheel's
    library) or the C program sets with ``tc_set_extern``
    (:mod:`tilecraft.codegen.graph_c_extern`); the manifest's ``c_externs`` (format 1.5) lists
    them and that lookup. The entries are compiled with the
    kernels at build time, so exporting needs no compiler; ``export_library(path,
    require_c_entry=True)`` refuses a model without them; :func:`write_c_header` writes the
    header alone.

Loading refuses, with an :class:`ExportError` that says what differs and before any of the
library's code is loaded: a file that is not a zip or is truncated, another format major
version or a newer minor one, a CPU architecture or ISA features this machine lacks, a GPU
arch this machine's GPU cannot run, and a member whose sha256 differs from the manifest's.
Files of an older minor version of the same major load. Loaded kernels are placed in the cache
under their sha256 (a damaged cached copy is written again).
"""

from .library import export_library as export_library
from .library import extract_c as extract_c
from .library import load_module as load_module
from .library import write_c_header as write_c_header
from .manifest import VERSION as VERSION
from .manifest import ExportError as ExportError
from .manifest import check_gpu_arch as check_gpu_arch
