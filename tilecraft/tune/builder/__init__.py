"""Builders: compile scheduled candidates into loadable artifacts, isolating failures."""

from ._compile import build_artifact as build_artifact
from ._compile import host_march as host_march
from ._compile import march_flags as march_flags
from .base import BuildArtifact as BuildArtifact
from .base import Builder as Builder
from .base import BuilderInput as BuilderInput
from .base import BuilderResult as BuilderResult
from .local import LocalBuilder as LocalBuilder
from .ray import RayBuilder as RayBuilder
