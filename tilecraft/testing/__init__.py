"""Test helpers: numeric checks against numpy, IR comparison, forked runs."""

from ..schedule.testing_utils import assert_fails_unchanged as assert_fails_unchanged
from ..schedule.testing_utils import verify_trace_roundtrip as verify_trace_roundtrip
from .forked import ForkOutcome as ForkOutcome
from .forked import run_forked as run_forked
from .ir_equal import assert_ir_equal as assert_ir_equal
from .numeric import DEFAULT_TOLERANCES as DEFAULT_TOLERANCES
from .numeric import bf16_to_f32 as bf16_to_f32
from .numeric import check_numeric as check_numeric
from .numeric import f32_to_bf16 as f32_to_bf16
